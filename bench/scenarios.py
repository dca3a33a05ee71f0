"""The timed part of each scenario, run once for one system on its run database.

The loop (bench/loop.py) has already copied the database from the scenario's template and
settled it (bench/settle.py); each function here starts the system, measures, stops it and
returns one plain dict of results.

- drain: a filled backlog, W relay processes, msgs/s = distinct messages / (last
  first-seen - first first-seen) on the topic.
- ours-debezium (drain and steady): Debezium on Kafka Connect instead of relay processes,
  set up and torn down per run by bench/debezium.py.
- steady: in bench/steady.py.
- inbox: a pre-filled input topic with duplicates, the system's consumer from scratch,
  rows/s = stored rows / (max(created_at) - min(created_at)).
- create cost: one-row business transactions without and with one create(), the two modes
  interleaved in blocks of ten and each transaction timed (drivers/common.py); for
  ours-debezium with its capture trigger and the connector streaming.
"""

from __future__ import annotations

import json
import time
from typing import Any

from . import cpu_split, debezium, procs
from .context import PARTITIONS, Context
from .kafka_io import TopicReader
from .sizes import Sizes
from .systems import OWN_SYSTEMS, System

Case = dict[str, Any]


def _stop_all(children: list[procs.Child]) -> list[str]:
    problems = []
    for child in children:
        if not child.alive():
            problems.append(f"exited early ({child.proc.returncode}): {child.tail(10)}")
        child.stop()
    return problems


def drain(
    ctx: Context,
    system: System,
    run_db: str,
    sizes: Sizes,
    case: Case,
    env_extra: dict[str, str] | None = None,
) -> dict[str, Any]:
    """`env_extra`: more environment for the relay processes (growth: a boxes file)."""
    if system.debezium:
        return debezium.drain(ctx, system, run_db, sizes, case)
    workers: int = case["workers"]
    backlog = sizes.backlog
    peer = system.name not in OWN_SYSTEMS
    cap_seconds = sizes.peer_cap if peer else sizes.drain_timeout
    topic = ctx.topic(f"drain-{system.name}-w{workers}")
    reader = TopicReader(ctx.bootstrap, topic, PARTITIONS, backlog)
    reader.start()
    started = time.time()
    children = [
        procs.Child(
            system.relay_cmd(topic),
            procs.base_env(
                **system.env(
                    ctx.pg.url(run_db),
                    topic,
                    BENCH_WORKER=f"{i}/{workers}",
                    **(env_extra or {}),
                )
            ),
            ctx.logs / f"{system.name}-drain-w{workers}.log",
            ctx.logs,
        )
        for i in range(workers)
    ]
    cpu_from = _first_seen(reader, children, started + cap_seconds)
    split_from = cpu_split.snapshot() if cpu_from is not None else None
    rss_from = _memory(children)
    complete = reader.wait(max(0.0, started + cap_seconds - time.time()))
    split_to = cpu_split.snapshot()
    # Messages seen from the first one to now: the one window both CPU figures divide by.
    window = len(reader.result.first_at) - cpu_from[1] if cpu_from else 0
    # One process only: with two, the second may still be starting up (imports) when the
    # first message is seen, and its start-up would be counted as relaying.
    relay_s = _relay_cpu(children, cpu_from, window, backlog) if workers == 1 else None
    cpu_us = None if relay_s is None else relay_s / window * 1e6
    machine = cpu_split.per_message(split_from, split_to, window, relay_s)
    rss_to = _memory(children)
    problems = _stop_all(children)
    seen = reader.result
    span = seen.span()
    return {
        "system": system.name,
        "workers": workers,
        "backlog": backlog,
        "delivered": seen.distinct,
        "complete": complete,
        "lost": backlog - seen.distinct if complete or cap_seconds >= 600 else None,
        "capped": not complete,
        "rate": seen.distinct / span if span > 0 else 0.0,
        "wall": (max(seen.first_at.values()) - started) if seen.first_at else 0.0,
        "duplicates": seen.duplicates(),
        "order_violations": seen.order_violations(),
        "keyless": seen.keyless(),
        "cpu_us_per_msg": cpu_us,
        # The whole machine's CPU per message in the same window, split by process group
        # (bench/cpu_split.py): what sets the rate when the cores are busy throughout.
        "machine_cpu": machine,
        # MiB, the largest relay process: at the first message, at the end, its peak.
        "rss_mb_first": rss_from[0] if rss_from else None,
        "rss_mb_end": rss_to[0] if rss_to else None,
        "rss_mb_peak": rss_to[1] if rss_to else None,
        "problems": problems,
    }


def _memory(children: list[procs.Child]) -> tuple[float, float] | None:
    """(resident MiB now, peak MiB) of the largest of the processes; None if one is gone."""
    found = [procs.memory_mb(c.proc.pid) for c in children]
    if not found or any(m is None for m in found):
        return None
    return max(m[0] for m in found if m), max(m[1] for m in found if m)


CpuMark = tuple[float, int]  # relay processes' CPU seconds, distinct messages seen
MIN_CPU_S = 0.1  # ten clock ticks: below that the figure is mostly rounding


def _first_seen(
    reader: TopicReader, children: list[procs.Child], deadline: float
) -> CpuMark | None:
    """Once the first message is on the topic (start-up and connecting are over): the relay
    processes' CPU time so far and the messages seen so far."""
    while not reader.result.first_at and time.time() < deadline and not reader.complete.is_set():
        time.sleep(0.005)
    cpu = [procs.cpu_seconds(c.proc.pid) for c in children]
    if not reader.result.first_at or any(c is None for c in cpu):
        return None
    return sum(c for c in cpu if c is not None), len(reader.result.first_at)


def _relay_cpu(
    children: list[procs.Child], start: CpuMark | None, window: int, backlog: int
) -> float | None:
    """Relay CPU seconds (all threads) from the first message seen to now, over which
    `window` messages were seen: what relaying costs, start-up excluded. None when the
    window is too short to measure: less than half the backlog in it (the reader fell behind
    a tiny drain) or under MIN_CPU_S of CPU (the kernel counts CPU time in 10 ms ticks)."""
    cpu = [procs.cpu_seconds(c.proc.pid) for c in children]
    if start is None or any(c is None for c in cpu):
        return None
    spent = sum(c for c in cpu if c is not None) - start[0]
    if window < max(1, backlog // 2) or spent < MIN_CPU_S:
        return None
    return spent


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def inbox(ctx: Context, system: System, run_db: str, sizes: Sizes, case: Case) -> dict[str, Any]:
    distinct = sizes.inbox_distinct
    command, extra = system.inbox_cmd(ctx.inbox_topic)
    env = procs.base_env(**system.env(ctx.pg.url(run_db), **extra))
    child = procs.Child(command, env, ctx.logs / f"{system.name}-inbox.log", ctx.logs)
    table = system.inbox_table()
    deadline = time.monotonic() + sizes.inbox_timeout
    while time.monotonic() < deadline and child.alive():
        stored = int(ctx.pg.fetchrow(run_db, f"SELECT count(*) FROM {table}")[0])
        if stored >= distinct:
            break
        time.sleep(0.5)
    time.sleep(1.0)  # anything past `distinct` would be a stored duplicate
    memory = _memory([child])
    problems = _stop_all([child])
    row = ctx.pg.fetchrow(
        run_db,
        f"SELECT count(*), count(DISTINCT uuid), "
        f"EXTRACT(EPOCH FROM max(created_at) - min(created_at)) FROM {table}",
    )
    rows, unique, span = int(row[0]), int(row[1]), float(row[2] or 0.0)
    sent = ctx.inbox_sent
    return {
        "system": system.name,
        "sent": sent,
        "distinct": distinct,
        "stored": rows,
        "stored_duplicates": rows - unique,
        "lost": distinct - unique,
        "rate": rows / span if span > 0 else 0.0,
        "consumed_rate": sent * rows / distinct / span if span > 0 else 0.0,
        "rss_mb_end": memory[0] if memory else None,
        "rss_mb_peak": memory[1] if memory else None,
        "problems": problems,
    }


def create_cost(
    ctx: Context, system: System, run_db: str, sizes: Sizes, case: Case
) -> dict[str, Any]:
    def measure(env: dict[str, str]) -> str:
        return procs.run(
            system.create_cost_cmd(sizes.cost_seconds, sizes.cost_rounds, ctx.size),
            env,
            ctx.logs / f"{system.name}-create-cost.log",
            ctx.logs,
        )

    problems: list[str] = []
    if system.debezium:  # the trigger captures each item, the connector streams them
        env = procs.base_env(**system.env(ctx.pg.url(run_db), ctx.topic("cost-ours-debezium")))
        with debezium.relay(ctx, system, env, "cost") as connector:
            output = measure(env)
        problems = connector.problems
    else:
        output = measure(procs.base_env(**system.env(ctx.pg.url(run_db))))
    result: dict[str, Any] = json.loads(
        [line for line in output.splitlines() if line.startswith("{")][-1]
    )
    return {
        "system": system.name,
        "rounds": {"without": result["without"], "with": result["with"]},
        "problems": problems,
        **cost_figures(result["summary"]),
    }


def cost_figures(summary: dict[str, dict[str, float]]) -> dict[str, Any]:
    """What create() adds, from the two modes' transaction times (drivers/common.py
    `cost_summary`): the headline from the trimmed means (stalls left out, see COST_TRIM
    there), beside it the same from all transactions and from the medians. `without` and
    `with` are the tx/s the trimmed means make, so `without / with - 1` is the headline."""
    base, more = summary["without"], summary["with"]

    def added(key: str) -> float:
        return (more[key] / base[key] - 1) * 100 if base[key] else float("nan")

    return {
        "without": 1e6 / base["trimmed_mean_us"],
        "with": 1e6 / more["trimmed_mean_us"],
        "overhead_pct": added("trimmed_mean_us"),
        "overhead_pct_all": added("mean_us"),
        "overhead_pct_median": added("median_us"),
        "us_per_tx": {"without": base, "with": more},
    }
