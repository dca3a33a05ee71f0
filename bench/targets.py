"""The targets table of the report: each goal, what the run measured, met or not. Drain
goals are checked in every repeat (the lowest repeat decides), not on medians."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .report_fmt import BASELINE, OURS, median_of
from .report_fmt import fmt as _fmt
from .report_growth import falls


def _every_repeat(
    per_repeat: list[dict[str, Any]],
    scenario: str,
    case: str,
    other: str,
    bound: float,
    *,
    at_most: bool = False,
) -> tuple[str, bool] | None:
    """Ours / `other` in each repeat of one case, and whether every repeat meets `bound`
    (at least, or at most for latency and cost)."""
    ratios = [
        r["ratios"][other]
        for r in per_repeat
        if r["scenario"] == scenario and r["case"] == case and r["ratios"].get(other) is not None
    ]
    if not ratios:
        return None
    met = max(ratios) <= bound if at_most else min(ratios) >= bound
    return " / ".join(f"{x:.2f}" for x in ratios) + "x", met


def _row(
    goal: str, found: tuple[str, bool] | None, check: Callable[[bool], str]
) -> list[list[str]]:
    return [] if found is None else [[goal, found[0], check(found[1])]]


def target_rows(
    results: dict[str, Any],
    peers: list[str],
    check: Callable[[bool], str],
    per_repeat: list[dict[str, Any]] | None = None,
) -> list[list[str]]:
    """Issue 7's absolute goals and issue 18's ratios to the raw baseline and the peers."""
    drains, steadies = results["drain"], results["steady"]
    repeats = per_repeat or []
    rows: list[list[str]] = []
    for workers in sorted({d["workers"] for d in drains}):
        goals = [(BASELINE, 1.3 if workers == 1 else 1.0)] + [(p, 10.0) for p in peers]
        for other, at_least in goals:
            found = _every_repeat(repeats, "drain", f"w{workers}", other, at_least)
            goal = f"drain, {workers} worker(s): >= {at_least:g}x {other} in every repeat"
            rows += _row(goal, found, check)
    ours1 = median_of(drains, "rate", system=OURS, workers=1)
    rows.append(["drain, 1 worker: >= 15,000 msgs/s", _fmt(ours1), check(ours1 >= 15000)])
    cpu = [
        d["cpu_us_per_msg"]
        for d in drains
        if d["system"] == OURS and d["workers"] == 1 and d.get("cpu_us_per_msg") is not None
    ]
    if cpu:
        rows.append(
            [
                "worker CPU per relayed message <= 15 us (1 worker, every repeat)",
                " / ".join(f"{x:.1f}" for x in cpu) + " us",
                check(max(cpu) <= 15),
            ]
        )
    p99 = median_of(steadies, "p99", system=OURS, rate=200)
    rows.append(["p99 commit-to-ack <= 10 ms at 200/s", f"{_fmt(p99, 1)} ms", check(p99 <= 10)])
    for case, at_most in (("200/s", 1.2), ("2000/s", 1.0)):
        found = _every_repeat(repeats, "steady", case, BASELINE, at_most, at_most=True)
        goal = f"p99 at {case}: <= {at_most:g}x baseline in every repeat"
        rows += _row(goal, found, check)
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
    found = _every_repeat(repeats, "inbox", "", BASELINE, 1.0)
    rows += _row("inbox: >= 1.0x baseline in every repeat", found, check)
    costs = results["create_cost"]
    mine = [c["overhead_pct"] for c in costs if c["system"] == OURS]
    if mine:
        rows.append(
            [
                "create() adds <= 25% to a one-row tx (every repeat)",
                " / ".join(f"{x:.1f}" for x in mine) + " %",
                check(max(mine) <= 25),
            ]
        )
    idle = [r for r in results.get("idle", []) if r["system"] == OURS]
    if idle:
        cpu = [r["cpu_pct"] for r in idle]
        rows.append(
            [
                f"idle, {idle[0]['boxes']} boxes: worker + consumer < 1% CPU (every repeat)",
                " / ".join(f"{x:.2f}" for x in cpu) + " %",
                check(max(cpu) < 1),
            ]
        )
        statements = [r["statements_per_s"] for r in idle]
        if all(s is not None for s in statements):
            rows.append(
                [
                    f"idle, {idle[0]['boxes']} boxes: < 20 statements/s in all (every repeat)",
                    " / ".join(f"{x:.1f}" for x in statements),
                    check(max(statements) < 20),
                ]
            )
    rows += _growth_rows(results.get("growth", []), check)
    rows += _memory_rows(results.get("memory", []), check)
    violations = sum(r["order_violations"] for r in [*drains, *steadies] if r["system"] == OURS)
    rows.append(
        ["0 per-key order violations (ours, every run)", str(violations), check(violations == 0)]
    )
    return rows


def _growth_rows(growth: list[dict[str, Any]], check: Callable[[bool], str]) -> list[list[str]]:
    """Issue 18: the drain falls by at most 10% with the largest table, kept or purging,
    and the claim stays an index range scan at every size."""
    rows: list[list[str]] = []
    ours = [r for r in growth if r["system"] == OURS]
    if not ours:
        return rows
    largest = max(r["rows"] for r in ours)
    found = falls(growth, OURS)
    for purging, how in ((False, "kept"), (True, "while retention purges them")):
        cases = {r["case"] for r in ours if r["rows"] == largest and r["purging"] == purging}
        ratios = [x for case, _, x in found if case in cases]
        if ratios:
            rows.append(
                [
                    f"drain with {largest:,} delivered rows {how}: >= 0.90x of 0 rows "
                    "(ours, every repeat)",
                    " / ".join(f"{x:.2f}" for x in ratios) + "x",
                    check(min(ratios) >= 0.9),
                ]
            )
    scans = [r["range_scan"] for r in ours if "range_scan" in r]
    rows.append(
        [
            "the claim is an index range scan at every table size (ours, every run)",
            f"{sum(scans)} of {len(scans)} runs",
            check(bool(scans) and all(scans)),
        ]
    )
    return rows


def _memory_rows(memory: list[dict[str, Any]], check: Callable[[bool], str]) -> list[list[str]]:
    """Issue 18: relay and consumer each < 250 MB draining the large backlog, and flat."""
    rows: list[list[str]] = []
    ours = [r for r in memory if r["system"] == OURS]
    for name in ("relay", "consumer"):
        peaks = [r[name]["rss_mb_peak"] for r in ours if r[name]["rss_mb_peak"] is not None]
        flat = [r[name]["flat"] for r in ours]
        if peaks:
            rows.append(
                [
                    f"memory, {name} draining {ours[0]['items']:,}: peak < 250 MB and flat "
                    "(ours, every repeat)",
                    " / ".join(f"{x:.0f}" for x in peaks)
                    + " MiB, flat "
                    + " / ".join({True: "yes", False: "no"}.get(f, "n/a") for f in flat),
                    check(max(peaks) * 1.048576 < 250 and all(f is True for f in flat)),
                ]
            )
    return rows
