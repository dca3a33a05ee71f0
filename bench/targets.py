"""The targets table of the report: each goal, what the run measured, met or not. Drain
goals are checked in every repeat (the lowest repeat decides), not on medians."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from .report import BASELINE, OURS, _fmt, median_of


def _every_repeat(
    per_repeat: list[dict[str, Any]], case: str, other: str, at_least: float
) -> tuple[str, bool] | None:
    ratios = [
        r["ratios"][other]
        for r in per_repeat
        if r["scenario"] == "drain" and r["case"] == case and r["ratios"].get(other) is not None
    ]
    if not ratios:
        return None
    return " / ".join(f"{x:.2f}" for x in ratios) + "x", min(ratios) >= at_least


def target_rows(
    results: dict[str, Any],
    peers: list[str],
    check: Callable[[bool], str],
    per_repeat: list[dict[str, Any]] | None = None,
) -> list[list[str]]:
    drains, steadies = results["drain"], results["steady"]
    rows = []
    for workers in sorted({d["workers"] for d in drains}):
        goals = [(BASELINE, 1.3 if workers == 1 else 1.0)] + [(p, 10.0) for p in peers]
        for other, at_least in goals:
            found = _every_repeat(per_repeat or [], f"w{workers}", other, at_least)
            if found is not None:
                rows.append(
                    [
                        f"drain, {workers} worker(s): >= {at_least:g}x {other} in every repeat",
                        found[0],
                        check(found[1]),
                    ]
                )
    ours1 = median_of(drains, "rate", system=OURS, workers=1)
    rows.append(["drain, 1 worker: >= 15,000 msgs/s", _fmt(ours1), check(ours1 >= 15000)])
    p99 = median_of(steadies, "p99", system=OURS, rate=200)
    rows.append(["p99 commit-to-ack <= 10 ms at 200/s", f"{_fmt(p99, 1)} ms", check(p99 <= 10)])
    first = median_of(steadies, "p99_first_third", system=OURS, rate=2000)
    last = median_of(steadies, "p99_last_third", system=OURS, rate=2000)
    rows.append(
        [
            "p99 bounded at 2,000/s (last third <= 2x first third + 5 ms)",
            f"{_fmt(first, 1)} -> {_fmt(last, 1)} ms",
            check(last <= 2 * first + 5),
        ]
    )
    inbox = median_of(results["inbox"], "rate", system=OURS)
    rows.append(["inbox >= 20,000 msgs/s with dedupe", _fmt(inbox), check(inbox >= 20000)])
    costs = results["create_cost"]
    if costs:
        overhead = statistics.median(c["overhead_pct"] for c in costs if c["system"] == OURS)
        rows.append(
            ["create() adds <= 10% to a one-row tx", f"{overhead:.1f}%", check(overhead <= 10)]
        )
    violations = sum(r["order_violations"] for r in [*drains, *steadies] if r["system"] == OURS)
    rows.append(
        ["0 per-key order violations (ours, every run)", str(violations), check(violations == 0)]
    )
    return rows
