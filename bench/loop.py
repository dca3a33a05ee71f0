"""The one loop every scenario runs through.

for each repeat (systems in that repeat's order, bench/order.py):
  for each scenario and case (bench/registry.py):
    for each system the scenario applies to:
      copy the run database from the scenario's template, settle it and wait for a quiet
      machine (bench/settle.py), run the timed part, drop the run database, keep the result
      with its repeat, position, case and settle record.
      A scenario may run a system's case in several rounds (bench/rounds.py: the short
      drains), interleaved A B B A across the systems; the median round is kept.

Interleaving (every system once per case before the next case) keeps the drift of a shared
machine from landing on one system. A run that fails, or during which the shared Kafka
broker restarted, is tried once more, then left out with a note in the problems.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import host, machine
from .context import Context, ensure_templates
from .envs import log
from .order import repeat_orders
from .registry import Case, Result, Scenario
from .rounds import all_runs, keep_median, round_order
from .settle import settle
from .sizes import Sizes
from .systems import System


@dataclass
class Plan:
    scenarios: list[Scenario]
    systems: list[System]
    sizes: Sizes
    repeats: int
    seed: int
    first_wait_s: float  # the quiet-start wait before the first timed run
    run_wait_s: float  # the bounded quiet wait before every later one


@dataclass
class Outcome:
    seed: int
    orders: list[list[str]]
    results: dict[str, list[Result]] = field(default_factory=dict)


def timed_run(
    ctx: Context, scenario: Scenario, system: System, case: Case, sizes: Sizes, wait_s: float
) -> Result:
    """One run of one scenario case for one system, on a fresh settled copy."""
    ensure_templates(ctx, system)
    run_db = ctx.database(system, "run")
    kind = scenario.template if scenario.prepare is None else scenario.prepare(ctx, system, case)
    template = ctx.database(system, kind)
    ctx.pg.recreate(run_db, template=template, file_copy=scenario.file_copy)
    try:
        record = settle(ctx.pg, run_db, wait_s)
        sampler = host.Sampler().start()
        try:
            result = scenario.run(ctx, system, run_db, sizes, case)
        finally:
            during = sampler.stop()
    finally:
        ctx.pg.drop(run_db)
    # The host's slow share while the run ran (bench/host.py): what its rate went through.
    record["host_during"] = during
    result["settle"] = record
    return result


def attempt(
    ctx: Context, scenario: Scenario, system: System, case: Case, sizes: Sizes, wait_s: float
) -> Result | None:
    """timed_run, again once if it failed or the shared broker restarted meanwhile (other
    jobs' fault tests stop it); None with a note after the second try."""
    label = " ".join(x for x in (scenario.name, system.name, scenario.label(case)) if x)
    for trial in (1, 2):
        broker = machine.kafka_pid()
        try:
            result = timed_run(ctx, scenario, system, case, sizes, wait_s)
        except Exception as exc:
            note = f"{label}: try {trial} failed: {type(exc).__name__}: {str(exc)[:300]}"
        else:
            if machine.kafka_pid() == broker and broker is not None:
                result["settle"]["tries"] = trial
                return result
            note = f"{label}: try {trial} discarded: the Kafka broker restarted during it"
        log(note)
        ctx.problems.append(note)
    return None


def run_plan(ctx: Context, plan: Plan) -> Outcome:
    by_name = {s.name: s for s in plan.systems}
    orders = repeat_orders([s.name for s in plan.systems], plan.repeats, plan.seed)
    outcome = Outcome(plan.seed, orders, {s.key: [] for s in plan.scenarios})
    wait_s = plan.first_wait_s
    fast = host.calibrate(5.0)
    log(
        f"host probe: the fast mode's unit {fast:.0f} µs (bench/host.py)"
        if fast
        else "host probe: no fast time found"
    )
    for repeat, names in enumerate(orders):
        log(f"repeat {repeat + 1}/{plan.repeats}: order {', '.join(names)} (seed {plan.seed})")
        for scenario in plan.scenarios:
            for case in scenario.cases(plan.sizes):
                systems = [by_name[n] for n in names if scenario.applies(by_name[n], case)]
                rounds = {s.name: scenario.rounds(plan.sizes, s) for s in systems}
                got: dict[str, list[Result]] = {s.name: [] for s in systems}
                label = scenario.label(case)
                for index in range(max(rounds.values(), default=0)):
                    for name in round_order([s.name for s in systems], index):
                        if index >= rounds[name]:
                            continue
                        result = attempt(ctx, scenario, by_name[name], case, plan.sizes, wait_s)
                        wait_s = plan.run_wait_s
                        if result is None:
                            continue
                        # Its place in this repeat's whole order, also where a scenario runs
                        # only some of the systems (scale: ours alone).
                        result.update(repeat=repeat, position=names.index(name), case=label)
                        got[name].append(result)
                        of = f"round {index + 1}/{rounds[name]}" if rounds[name] > 1 else ""
                        head = " ".join(x for x in (scenario.name, name, label, of) if x)
                        log(f"{head}: {scenario.describe(result)}")
                for system in systems:
                    if got[system.name]:
                        kept = keep_median(got[system.name], scenario.metric)
                        outcome.results[scenario.key].append(kept)
    return outcome


def settle_counts(results: dict[str, list[Result]]) -> dict[str, Any]:
    """How many timed runs there were and how many were settled (both must be equal)."""
    records = [r["settle"] for rows in results.values() for r in all_runs(rows)]
    return {
        "timed_runs": len(records),
        "checkpoints": sum(r["checkpoint"] for r in records),
        "vacuum_analyze": sum(r["vacuum_analyze"] for r in records),
        "quiet_at_start": sum(1 for r in records if r["quiet"]),
    }
