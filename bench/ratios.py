"""Per-repeat values and ratios, and their spread: what the report and the results files show
besides medians.

A ratio compares two systems within the same repeat and case (same machine state, runs a
few seconds apart), which is the number that should reproduce. Every ratio is ours / the
other system's value of the scenario's headline metric: for rates higher is better for us,
for latency and added cost lower is.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from .registry import Result, Scenario

OURS = "ours"
BASELINE = "baseline"


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not b or math.isnan(a) or math.isnan(b):
        return None
    return a / b


def host_slow(result: Result) -> float | None:
    """The share of the run's time the host's cores were slow (bench/host.py); None for
    runs recorded before it was measured."""
    during = result["settle"].get("host_during") or {}
    share = during.get("slow_share")
    return None if share is None else float(share)


def repeat_rows(scenario: Scenario, rows: list[Result], systems: list[str]) -> list[dict[str, Any]]:
    """One record per (case, repeat): each system's value, its position in the order, and
    ours / each other system."""
    out = []
    cases = list(dict.fromkeys(r["case"] for r in rows))
    for case in cases:
        for repeat in sorted({r["repeat"] for r in rows if r["case"] == case}):
            mine = {r["system"]: r for r in rows if r["case"] == case and r["repeat"] == repeat}
            values = {s: float(mine[s][scenario.metric]) for s in systems if s in mine}
            ours = values.get(OURS)
            out.append(
                {
                    "scenario": scenario.name,
                    "case": case,
                    "repeat": repeat,
                    "metric": scenario.metric,
                    "values": values,
                    "positions": {s: mine[s]["position"] for s in values},
                    "cpu_active": {s: mine[s]["settle"]["cpu_active_pct"] for s in values},
                    "host_slow": {s: host_slow(mine[s]) for s in values},
                    "ratios": {s: _ratio(ours, v) for s, v in values.items() if s != OURS},
                }
            )
    return out


def spread(values: list[float]) -> dict[str, float] | None:
    """min, median, max and relative spread (max - min) / median of a list of ratios."""
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return None
    median = statistics.median(values)
    return {
        "min": min(values),
        "median": median,
        "max": max(values),
        "rel_spread": (max(values) - min(values)) / median if median else float("nan"),
        "n": len(values),
    }


def spreads(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (scenario, case, other system): the spread of ours / it over the repeats."""
    out = []
    keys = list(dict.fromkeys((r["scenario"], r["case"], s) for r in rows for s in r["ratios"]))
    for scenario, case, other in keys:
        values = [
            r["ratios"][other]
            for r in rows
            if r["scenario"] == scenario and r["case"] == case and other in r["ratios"]
        ]
        summary = spread(values)
        if summary is not None:
            out.append({"scenario": scenario, "case": case, "vs": other, **summary})
    return out


def all_rows(
    scenarios: list[Scenario], results: dict[str, list[Result]], systems: list[str]
) -> list[dict[str, Any]]:
    return [row for s in scenarios for row in repeat_rows(s, results.get(s.key, []), systems)]
