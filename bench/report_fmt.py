"""Formatting shared by the report's sections: numbers, medians, ratios, tables."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import Any

BASELINE = "baseline"
OURS = "ours"


def fmt(value: float, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:,.{digits}f}"


def summary(values: Iterable[float | None], digits: int = 0) -> str:
    found = [v for v in values if v is not None and not math.isnan(v)]
    if not found:
        return "n/a"
    median = statistics.median(found)
    if len(found) == 1:
        return fmt(median, digits)
    return f"{fmt(median, digits)} ({fmt(min(found), digits)}-{fmt(max(found), digits)})"


def median_of(rows: list[dict[str, Any]], key: str, **match: Any) -> float:
    values = [r[key] for r in rows if all(r[k] == v for k, v in match.items())]
    return statistics.median(values) if values else float("nan")


def ratio(a: float, b: float) -> str:
    if not b or math.isnan(a) or math.isnan(b):
        return "n/a"
    return f"{a / b:.2f}x"


def rounds_listed(runs: list[dict[str, Any]], metric: str, spec: str) -> str:
    """Every round's `metric` of runs made in rounds (bench/rounds.py), repeat by repeat:
    rounds joined by " / ", the kept one in bold, repeats by "; " ("" when none has rounds)."""
    return "; ".join(
        " / ".join(
            f"**{r[metric]:{spec}}**" if r["kept"] else f"{r[metric]:{spec}}" for r in run["rounds"]
        )
        for run in sorted(runs, key=lambda run: run["repeat"])
        if run.get("rounds")
    )


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines
