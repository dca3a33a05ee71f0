"""Every scenario as one entry: its cases, the template its run database is copied from,
the timed function, its headline metric and its log line.

Adding a scenario is one entry in SCENARIOS (and its timed function in scenarios.py): the
loop (bench/loop.py), the order of systems, the settling before each run, the per-repeat
ratios (bench/ratios.py) and the results files all work from these entries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import growth, idle, memory, mixed, scale, scenarios, steady
from .context import Context
from .sizes import Sizes
from .systems import OWN_SYSTEMS, STEADY_ROUNDS, System, ours_worker_or_baseline

Case = dict[str, Any]
Result = dict[str, Any]


@dataclass(frozen=True)
class Scenario:
    name: str  # what --scenarios takes and the log lines start with
    key: str  # where its results go in results.json
    template: str  # "backlog" or "empty": the run database is a copy of it
    metric: str  # the headline value of a run, compared per repeat
    unit: str
    lower_is_better: bool
    cases: Callable[[Sizes], list[Case]]
    label: Callable[[Case], str]  # the case in log lines and the report ("w1", "200/s")
    run: Callable[[Context, System, str, Sizes, Case], Result]
    describe: Callable[[Result], str]
    # Whether a system runs a case (the inbox needs a consumer; Debezium has one drain case).
    applies: Callable[[System, Case], bool] = lambda system, case: True
    # A case's own template, built on first use (growth: the backlog behind N delivered
    # rows); returns its kind, the database being ctx.database(system, kind).
    prepare: Callable[[Context, System, Case], str] | None = None
    # Copy the run database with PostgreSQL's FILE_COPY strategy (templates of gigabytes).
    file_copy: bool = False
    # Timed runs of a case per system and repeat, the median kept (bench/rounds.py).
    rounds: Callable[[Sizes, System], int] = lambda sizes, system: 1


def _drain_line(r: Result) -> str:
    line = (
        f"{r['rate']:,.0f} msgs/s, {r['delivered']:,} delivered, dups {r['duplicates']}, "
        f"order violations {r['order_violations']}"
    )
    if "commit_to_last" in r:
        line += (
            f", switch commit -> first {r['commit_to_first']:.1f} s, "
            f"-> last {r['commit_to_last']:.1f} s"
        )
    machine = r.get("machine_cpu")
    if machine:
        relays = "" if machine["relays"] is None else f", relay {machine['relays']:.1f}"
        line += (
            f"; machine {machine['busy_pct']:.0f}% busy, CPU µs/msg: all {machine['all']:.1f}"
            f"{relays}, postgres {machine['postgres']:.1f}, kafka {machine['kafka']:.1f}, "
            f"reader {machine['harness']:.1f}, other {machine['other']:.1f}"
        )
    return line


def _steady_line(r: Result) -> str:
    return (
        f"p50 {r['p50']:.1f} p99 {r['p99']:.1f} ms, undelivered {r['undelivered']}, "
        f"order violations {r['order_violations']}"
    )


def _inbox_line(r: Result) -> str:
    return f"{r['rate']:,.0f} rows/s, lost {r['lost']}, stored twice {r['stored_duplicates']}"


def _cost_line(r: Result) -> str:
    return f"{r['without']:,.0f} -> {r['with']:,.0f} tx/s (+{r['overhead_pct']:.1f}% per tx)"


def _scale_line(r: Result) -> str:
    settles = ", ".join(
        f"{c['change']} {c['workers']}: "
        + ("NOT settled" if c["settle_s"] is None else f"{c['settle_s'] * 1000:.0f} ms")
        for c in r["changes"]
    )
    return (
        f"settled after {settles}; {r['delivered']:,}/{r['committed']:,} delivered, dups "
        f"{r['duplicates']}, order violations {r['order_violations']}"
    )


def _idle_line(r: Result) -> str:
    statements = r["statements_per_s"]
    return (
        f"{r['boxes']} boxes: CPU relay {r['relay_cpu_pct']:.2f}% + consumer "
        f"{r['consumer_cpu_pct']:.2f}%, PostgreSQL backends {r['backend_cpu_pct']:.2f}%; "
        + ("statements/s n/a" if statements is None else f"{statements:.1f} statements/s")
        + f", {r['transactions_per_s']:.1f} transactions/s"
    )


def _growth_line(r: Result) -> str:
    line = _drain_line(r)
    if r["purging"]:
        line += f", purged {r['purged']:,} rows ({r['purged_per_s']:,.0f}/s)"
    if "range_scan" in r:
        line += ", claim: " + ("index range scan" if r["range_scan"] else "NOT an index range scan")
    return line


def _memory_line(r: Result) -> str:
    def one(name: str, m: dict[str, Any]) -> str:
        rate = "n/a" if m["rate"] is None else f"{m['rate']:,.0f}/s"
        return (
            f"{name} {rate}, RSS {m['rss_mb_first_half'] or 0:.0f} MiB in the first half, "
            f"{m['rss_mb_second_half'] or 0:.0f} in the second, peak "
            f"{m['rss_mb_peak'] or 0:.0f} MiB" + ("" if m["flat"] else " (NOT flat)")
        )

    return (
        f"{one('relay', r['relay'])}; {one('consumer', r['consumer'])}; pending left "
        f"{r['left_pending']}, lost {r['lost']}, stored twice {r['stored_duplicates']}"
    )


def _mixed_line(r: Result) -> str:
    def ms(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.1f}"

    return (
        f"api {r['api_rate']:,.0f}/s of {r['api_target_rate']:,} (p50 {ms(r['api_p50'])} p99 "
        f"{ms(r['api_p99'])} ms, {r['api_errors']} errors); relay p50 {ms(r['relay_p50'])} "
        f"p99 {ms(r['relay_p99'])} ms, undelivered {r['relay_undelivered']}; inbox "
        f"{r['inbox_rate']:,.0f}/s of {r['inbox_target_rate']:,} (p50 {ms(r['inbox_p50'])} "
        f"p99 {ms(r['inbox_p99'])} ms), unhandled {r['inbox_unhandled']}"
    )


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        name="drain",
        key="drain",
        template="backlog",
        metric="rate",
        unit="msgs/s",
        lower_is_better=False,
        cases=lambda sizes: [{"workers": w} for w in sizes.workers],
        label=lambda case: f"w{case['workers']}",
        run=scenarios.drain,
        describe=_drain_line,
        applies=lambda system, case: not system.debezium or case["workers"] == 1,
        # The short drains (ours, ours-debezium, the baseline: 2-5 s) in rounds; a peer's
        # drain (30-60 s) spans the host's phases by itself.
        rounds=lambda sizes, system: sizes.drain_rounds if system.name in OWN_SYSTEMS else 1,
    ),
    Scenario(
        name="steady",
        key="steady",
        template="empty",
        metric="p99",
        unit="ms p99",
        lower_is_better=True,
        cases=lambda sizes: [{"rate": r} for r in sizes.rates],
        label=lambda case: f"{case['rate']}/s",
        run=steady.steady,
        describe=_steady_line,
        # As the drains: a 30-s window's p99 is set by the host's slow phases that fall in
        # it, so ours and the baseline run each rate in rounds, interleaved A B B A, the
        # median p99 kept. ours-debezium and the peers run once: their p99 is set by their
        # own polling (Debezium's 47-49 ms, a rare stall aside: bench/notes.md), or is
        # seconds, not by the host's phases; more windows of theirs only cost time.
        rounds=lambda sizes, system: sizes.steady_rounds if system.name in STEADY_ROUNDS else 1,
    ),
    Scenario(
        name="inbox",
        key="inbox",
        template="empty",
        metric="rate",
        unit="rows/s",
        lower_is_better=False,
        cases=lambda sizes: [{}],
        label=lambda case: "",
        run=scenarios.inbox,
        describe=_inbox_line,
        applies=lambda system, case: system.inbox,
        # As the drains: ours' and the baseline's ingest of the topic takes 3-4 s, which falls
        # mostly in one of the host's fast or slow phases (the baseline's rate was 27,173 rows/s
        # on a host slow 69% of the time and 40,845 on one slow 25%, in one run: bench/notes.md),
        # so each ingests it in rounds, a new consumer group each, the median rate kept.
        rounds=lambda sizes, system: sizes.inbox_rounds if system.inbox else 1,
    ),
    Scenario(
        name="cost",
        key="create_cost",
        template="empty",
        metric="overhead_pct",
        unit="% added per tx",
        lower_is_better=True,
        cases=lambda sizes: [{}],
        label=lambda case: "",
        run=scenarios.create_cost,
        describe=_cost_line,
    ),
    Scenario(
        name="scale",
        key="scale",
        template="empty",
        metric="max_settle_ms",
        unit="ms until settled (slowest change)",
        lower_is_better=True,
        cases=lambda sizes: [{"workers": sizes.scale_workers, "buckets": sizes.scale_buckets}],
        label=lambda case: f"{case['workers']} workers",
        run=scale.scale,
        describe=_scale_line,
        # Ours alone: the baseline's ownership is static, the peers have none.
        applies=lambda system, case: system.project is not None and not system.debezium,
    ),
    Scenario(
        name="idle",
        key="idle",
        template="empty",
        metric="cpu_pct",
        unit="% of a core (relay + consumer), idle",
        lower_is_better=True,
        cases=lambda sizes: [{}],
        label=lambda case: "",
        run=idle.idle,
        describe=_idle_line,
        # Ours (10 boxes) and the baseline (its relay and consumer).
        applies=lambda system, case: ours_worker_or_baseline(system),
    ),
    Scenario(
        name="growth",
        key="growth",
        template="backlog",
        metric="rate",
        unit="msgs/s",
        lower_is_better=False,
        cases=growth.cases,
        label=growth.label,
        run=growth.growth,
        describe=_growth_line,
        applies=growth.applies,
        prepare=growth.prepare,
        file_copy=True,
    ),
    Scenario(
        name="memory",
        key="memory",
        template="empty",
        metric="peak_mb",
        unit="MiB peak RSS (the larger of relay and consumer)",
        lower_is_better=True,
        cases=lambda sizes: [{"items": sizes.memory_items}],
        label=lambda case: f"{case['items']:,}",
        run=memory.memory,
        describe=_memory_line,
        applies=memory.applies,
        prepare=memory.prepare,
        file_copy=True,
    ),
    Scenario(
        name="mixed",
        key="mixed",
        template="empty",
        metric="relay_p99",
        unit="ms p99 from an order's transaction start to its order_created on the topic",
        lower_is_better=True,
        cases=lambda sizes: [{}],
        label=lambda case: "",
        run=mixed.mixed,
        describe=_mixed_line,
        applies=mixed.applies,
    ),
)
BY_NAME: dict[str, Scenario] = {s.name: s for s in SCENARIOS}
NAMES: tuple[str, ...] = tuple(BY_NAME)
