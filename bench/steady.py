"""The steady scenario: paced transactions for `duration`, latency = consumer receive time -
commit time, per item (commit time taken by the load process right after COMMIT returned).

Besides the run's percentiles it keeps two things that tell a tail apart from a stall:

- `p99_by_second`: the p99 of the items committed in each second of the measured window. A
  run whose p99 comes from one stall has one or two seconds far above the others; a run
  whose every second is a little slower has a flat series at its p99.
- `produce_split`: each item's latency cut at the moment its relay called `produce()` (the
  message's Kafka CreateTime): commit -> produce (the relay's wake-up, claim and build) and
  produce -> reader (the producer's batching, the broker, the reader's fetch), p50 and p99 of
  each. A tail made in the relay shows on the first side only; a busier machine slows both.
  CreateTime is in whole milliseconds (taken at the produce call, truncated), so the first
  part reads up to 1 ms low and the second as much high, for every system alike. None for
  ours-debezium: Debezium's outbox event router stamps its records with the change event's
  time, not a produce call's.
- `machine_cpu` and `cpu_us_per_msg`: the machine's CPU per committed item over the load
  (warm-up included), split as in the drain (bench/cpu_split.py), and the relay's own. The
  load process is in "other". At 2,000 items/s the cores are far from full, so this says
  what a message costs at small batches, not what sets the latency; a busy share near 100%
  in a stalled second's run would.
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

from . import cpu_split, debezium, procs
from .context import PARTITIONS, Context
from .kafka_io import TopicReader
from .scenarios import MIN_CPU_S, Case, _stop_all, percentile
from .sizes import Sizes
from .systems import System

# A second with fewer items than this has no p99 of its own (rounding): its entry is None.
MIN_ITEMS_PER_SECOND = 20


def p99_by_second(
    commits: dict[int, float], first_at: dict[int, float], skip: int
) -> list[float | None]:
    """The p99 latency (ms) of the items committed in each whole second of the measured
    window (sequence numbers >= `skip`), counted from the first measured commit. Items not
    delivered are left out (the run counts them as undelivered)."""
    measured = sorted((t, s) for s, t in commits.items() if s >= skip)
    if not measured:
        return []
    start = measured[0][0]
    seconds: dict[int, list[float]] = {}
    for committed, seq in measured:
        seen = first_at.get(seq)
        if seen is not None:
            seconds.setdefault(int(committed - start), []).append((seen - committed) * 1000)
    last = int(measured[-1][0] - start)
    return [
        round(percentile(seconds[i], 99), 2)
        if len(seconds.get(i, ())) >= MIN_ITEMS_PER_SECOND
        else None
        for i in range(last + 1)
    ]


def worst_second(series: list[float | None]) -> dict[str, Any] | None:
    """The series in three numbers: the median second's p99, the worst second (its index
    and p99), and how many seconds were above twice the median's."""
    known = [(i, v) for i, v in enumerate(series) if v is not None]
    if not known:
        return None
    median = statistics.median(v for _, v in known)
    index, worst = max(known, key=lambda pair: pair[1])
    return {
        "median_ms": median,
        "worst_ms": worst,
        "worst_at_s": index,
        "seconds_over_2x": sum(1 for _, v in known if v > 2 * median),
        "seconds": len(known),
    }


def produce_split(
    commits: dict[int, float],
    first_at: dict[int, float],
    created_at: dict[int, float],
    skip: int,
) -> dict[str, float | int] | None:
    """The measured items' latency in two parts at their produce call (ms): p50 and p99 of
    commit -> CreateTime and of CreateTime -> the reader's receipt, over the items (sequence
    numbers >= `skip`) that were delivered with a producer's timestamp. None when none was."""
    before: list[float] = []
    after: list[float] = []
    for seq, committed in commits.items():
        created, seen = created_at.get(seq), first_at.get(seq)
        if seq < skip or created is None or seen is None:
            continue
        before.append((created - committed) * 1000)
        after.append((seen - created) * 1000)
    if not before:
        return None
    return {
        "items": len(before),
        "to_produce_p50": percentile(before, 50),
        "to_produce_p99": percentile(before, 99),
        "after_produce_p50": percentile(after, 50),
        "after_produce_p99": percentile(after, 99),
    }


def steady(ctx: Context, system: System, run_db: str, sizes: Sizes, case: Case) -> dict[str, Any]:
    rate: int = case["rate"]
    duration, warmup = sizes.duration, sizes.warmup
    topic = ctx.topic(f"steady-{system.name}-{rate}")
    per_tx = max(1, round(rate / sizes.tx_rate))
    tx_rate = rate / per_tx
    total = round(tx_rate * (duration + warmup)) * per_tx
    reader = TopicReader(ctx.bootstrap, topic, PARTITIONS, total)
    reader.start()
    env = procs.base_env(**system.env(ctx.pg.url(run_db), topic))
    out = ctx.logs / f"{system.name}-steady-{rate}-commits.json"

    def load(env: dict[str, str]) -> None:
        procs.run(
            system.load_cmd(0, tx_rate, per_tx, duration + warmup, ctx.keys, ctx.size, out),
            env,
            ctx.logs / f"{system.name}-steady-{rate}-load.log",
            ctx.logs,
            timeout=duration * 20 + 120,
        )

    relay_s: float | None = None
    split: tuple[cpu_split.Snapshot, cpu_split.Snapshot] | None = None
    if system.debezium:
        problems = debezium.steady_delivery(ctx, system, run_db, topic, reader, load)
    else:
        relay = procs.Child(
            system.relay_cmd(topic), env, ctx.logs / f"{system.name}-steady-{rate}.log", ctx.logs
        )
        time.sleep(4.0)  # imports, connections, bucket ownership
        split_from = cpu_split.snapshot()
        relay_from = procs.cpu_seconds(relay.proc.pid)
        load(env)
        split = (split_from, cpu_split.snapshot())
        relay_to = procs.cpu_seconds(relay.proc.pid)
        if relay_from is not None and relay_to is not None:
            relay_s = relay_to - relay_from
        reader.wait(15.0)
        problems = _stop_all([relay])
    loaded_run = json.loads(out.read_text())
    commits: dict[int, float] = {int(s): float(t) for s, t in loaded_run["commits"]}
    # CPU per committed item over the load (warm-up included); none for Debezium's runs.
    machine = cpu_split.per_message(*split, len(commits), relay_s) if split else None
    relay_us = (
        relay_s / len(commits) * 1e6
        if relay_s is not None and relay_s >= MIN_CPU_S and commits
        else None
    )
    skip = round(tx_rate * warmup) * per_tx
    seen = reader.result
    latencies = [
        (seen.first_at[s] - t) * 1000
        for s, t in commits.items()
        if s >= skip and s in seen.first_at
    ]
    measured = [s for s in commits if s >= skip]
    thirds = [latencies[: len(latencies) // 3], latencies[-(len(latencies) // 3) :]]
    series = p99_by_second(commits, seen.first_at, skip)
    return {
        "system": system.name,
        "rate": rate,
        "achieved_rate": len(commits) / float(loaded_run["elapsed"]),
        "per_tx": per_tx,
        "items": len(measured),
        "undelivered": len(measured) - len(latencies),
        "p50": percentile(latencies, 50),
        "p95": percentile(latencies, 95),
        "p99": percentile(latencies, 99),
        "p99_first_third": percentile(thirds[0], 99),
        "p99_last_third": percentile(thirds[1], 99),
        "mean": statistics.fmean(latencies) if latencies else float("nan"),
        "latencies": latencies,
        "p99_by_second": series,
        "worst_second": worst_second(series),
        "produce_split": None
        if system.debezium
        else produce_split(commits, seen.first_at, seen.created_at, skip),
        "cpu_us_per_msg": relay_us,
        "machine_cpu": machine,
        "duplicates": seen.duplicates(),
        "order_violations": seen.order_violations(),
        "problems": problems,
    }
