"""Rounds: a short timed run made several times within one repeat, the median one kept.

Why: ours', ours-debezium's and the baseline's drains of the full backlog take 2-5 s. On the
shared virtual machines the bench runs on, the host's cores flip between a fast and a slow
mode in phases of seconds (bench/host.py), so one such drain falls mostly in one mode or the
other, and a CPU-bound system (ours) slows more than one that waits on round trips (the
baseline): one drain per repeat gave ours / the baseline 1.04 and 0.83x in two repeats of one
run (2026-12-05). Each round is a timed run like any other (a fresh copy, settled, a quiet
start); the rounds of a case run interleaved across the systems, in the repeat's order and
then reversed (A B B A ...), so a drift of the machine within the case lands on every system
alike.

The round whose headline value is the median of the system's rounds (of an even number, the
lower middle by value) is the repeat's result: a real run, whose CPU split, memory and settle
record belong to the value shown. The others are kept beside it (`other_rounds`, whole) and
in `rounds` (each round's value, host slow share and whether it was kept), so the report
shows every round and the correctness checks see every drain, not only the kept one.
Peers' drains (30-60 s each) already span many of the host's phases and run once. The
steady windows of ours and the baseline, and their inbox ingests (3-4 s), run in rounds too
(bench/registry.py says which scenario makes how many).
"""

from __future__ import annotations

from typing import Any

Result = dict[str, Any]


def round_order(names: list[str], index: int) -> list[str]:
    """The systems' order in round `index` (0-based): as given, then reversed, and so on."""
    return list(names) if index % 2 == 0 else list(reversed(names))


def keep_median(results: list[Result], metric: str) -> Result:
    """The run with the median `metric` (the lower middle of an even number by value), with
    every round summarised in `rounds` and the other runs in `other_rounds`; each run gets its
    `round` (0-based, in the order made) and whether it was `kept`. A single run is returned
    as it is."""
    if not results:
        raise ValueError("keep_median needs at least one run")
    if len(results) == 1:
        return results[0]
    ranked = sorted(range(len(results)), key=lambda i: float(results[i][metric]))
    kept = ranked[(len(ranked) - 1) // 2]
    for i, r in enumerate(results):
        r.update(round=i, kept=i == kept)
    chosen = dict(results[kept])
    chosen["rounds"] = [
        {
            "round": i,
            metric: float(r[metric]),
            "host_slow": ((r.get("settle") or {}).get("host_during") or {}).get("slow_share"),
            "kept": i == kept,
        }
        for i, r in enumerate(results)
    ]
    chosen["other_rounds"] = [r for i, r in enumerate(results) if i != kept]
    return chosen


def every_run(result: Result) -> list[Result]:
    """The kept run and the rounds beside it: what correctness and settle counts look at."""
    return [result, *result.get("other_rounds", [])]


def all_runs(results: list[Result]) -> list[Result]:
    """Every timed run behind a scenario's kept results, the other rounds included."""
    return [run for kept in results for run in every_run(kept)]
