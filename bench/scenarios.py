"""The scenarios, each run once for one system; results are plain dicts (one per run).

- drain: a filled backlog (a copy of the system's template database), W relay processes,
  msgs/s = distinct messages / (last first-seen - first first-seen) on the topic.
- steady: paced transactions for `duration`, latency = consumer receive time - commit
  time, per item (commit time taken by the load process right after COMMIT returned).
- inbox: a pre-filled input topic with duplicates, the system's consumer from scratch,
  msgs/s = stored rows / (max(created_at) - min(created_at)).
- create cost: one-row business transactions/s without and with one create().
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import procs
from .envs import log
from .kafka_io import TopicReader, create_topic, delete_topics
from .pg import Postgres
from .systems import System

PARTITIONS = 8


@dataclass
class Context:
    pg: Postgres
    bootstrap: str
    logs: Path
    keys: int
    size: int
    topics: list[str]
    backlog: int = 0
    problems: list[str] = field(default_factory=list)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:6])

    def databases(self, systems: list[System]) -> list[str]:
        return [_db(self, s, k) for s in systems for k in ("empty", "backlog", "run")]

    def topic(self, label: str) -> str:
        name = f"bench-{label}-{uuid.uuid4().hex[:8]}"
        create_topic(self.bootstrap, name, PARTITIONS)
        self.topics.append(name)
        return name

    def cleanup(self) -> None:
        delete_topics(self.bootstrap, self.topics)
        self.topics.clear()


def _db(ctx: Context, system: System, kind: str) -> str:
    """bench_<run>_<system>_<kind>: each run has its own databases (runs may overlap on
    shared services, e.g. a quick run in someone's test suite during a full run)."""
    return f"bench_{ctx.run_id}_{system.name.replace('-', '_')}_{kind}"


def prepare_templates(ctx: Context, system: System, backlog: int) -> procs.Child | None:
    """Create `<sys>_empty` (schema) and start filling `<sys>_backlog` (schema + backlog);
    the fill runs in the background and is returned so that systems fill in parallel."""
    empty, backlog_db = _db(ctx, system, "empty"), _db(ctx, system, "backlog")
    for database in (empty, backlog_db):
        ctx.pg.recreate(database)
        env = procs.base_env(**system.env(ctx.pg.url(database)))
        for command in system.schema_cmds():
            procs.run(command, env, ctx.logs / f"{system.name}-schema.log", ctx.logs)
    if backlog == 0:
        return None
    env = procs.base_env(**system.env(ctx.pg.url(backlog_db)))
    return procs.Child(
        system.fill_cmd(backlog, ctx.keys, ctx.size),
        env,
        ctx.logs / f"{system.name}-fill.log",
        ctx.logs,
    )


def ensure_templates(ctx: Context, system: System) -> None:
    """Rebuild a system's template databases if they vanished (the services are shared, and
    another job's cleanup may drop them); noted in the results."""
    names = [_db(ctx, system, "empty")] + ([_db(ctx, system, "backlog")] if ctx.backlog else [])
    if all(ctx.pg.exists(name) for name in names):
        return
    note = f"{system.name}: template databases were gone (dropped by another job?); rebuilt them"
    log(note)
    ctx.problems.append(note)
    child = prepare_templates(ctx, system, ctx.backlog)
    if child is not None and child.proc.wait(3600) != 0:
        raise RuntimeError(f"refilling {system.name} failed:\n{child.tail()}")
    if child is not None:
        child.stop()


def _stop_all(children: list[procs.Child]) -> list[str]:
    problems = []
    for child in children:
        if not child.alive():
            problems.append(f"exited early ({child.proc.returncode}): {child.tail(10)}")
        child.stop()
    return problems


def drain(
    ctx: Context, system: System, workers: int, backlog: int, cap_seconds: float
) -> dict[str, Any]:
    run_db = _db(ctx, system, "run")
    ensure_templates(ctx, system)
    ctx.pg.recreate(run_db, template=_db(ctx, system, "backlog"))
    topic = ctx.topic(f"drain-{system.name}-w{workers}")
    reader = TopicReader(ctx.bootstrap, topic, PARTITIONS, backlog)
    reader.start()
    started = time.time()
    children = [
        procs.Child(
            system.relay_cmd(topic),
            procs.base_env(**system.env(ctx.pg.url(run_db), topic, BENCH_WORKER=f"{i}/{workers}")),
            ctx.logs / f"{system.name}-drain-w{workers}.log",
            ctx.logs,
        )
        for i in range(workers)
    ]
    complete = reader.wait(cap_seconds)
    problems = _stop_all(children)
    ctx.pg.drop(run_db)
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
        "problems": problems,
    }


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def steady(
    ctx: Context, system: System, rate: int, duration: float, warmup: float, tx_rate: float
) -> dict[str, Any]:
    run_db = _db(ctx, system, "run")
    ensure_templates(ctx, system)
    ctx.pg.recreate(run_db, template=_db(ctx, system, "empty"))
    topic = ctx.topic(f"steady-{system.name}-{rate}")
    per_tx = max(1, round(rate / tx_rate))
    tx_rate = rate / per_tx
    total = round(tx_rate * (duration + warmup)) * per_tx
    reader = TopicReader(ctx.bootstrap, topic, PARTITIONS, total)
    reader.start()
    env = procs.base_env(**system.env(ctx.pg.url(run_db), topic))
    relay = procs.Child(
        system.relay_cmd(topic), env, ctx.logs / f"{system.name}-steady-{rate}.log", ctx.logs
    )
    time.sleep(4.0)  # imports, connections, bucket ownership
    out = ctx.logs / f"{system.name}-steady-{rate}-commits.json"
    procs.run(
        system.load_cmd(0, tx_rate, per_tx, duration + warmup, ctx.keys, ctx.size, out),
        env,
        ctx.logs / f"{system.name}-steady-{rate}-load.log",
        ctx.logs,
        timeout=duration * 20 + 120,
    )
    reader.wait(15.0)
    problems = _stop_all([relay])
    ctx.pg.drop(run_db)
    loaded = json.loads(out.read_text())
    commits: dict[int, float] = {int(s): float(t) for s, t in loaded["commits"]}
    skip = round(tx_rate * warmup) * per_tx
    seen = reader.result
    latencies = [
        (seen.first_at[s] - t) * 1000
        for s, t in commits.items()
        if s >= skip and s in seen.first_at
    ]
    measured = [s for s in commits if s >= skip]
    thirds = [latencies[: len(latencies) // 3], latencies[-(len(latencies) // 3) :]]
    return {
        "system": system.name,
        "rate": rate,
        "achieved_rate": len(commits) / float(loaded["elapsed"]),
        "per_tx": per_tx,
        "items": len(measured),
        "undelivered": len(measured) - len(latencies),
        "p50": _percentile(latencies, 50),
        "p95": _percentile(latencies, 95),
        "p99": _percentile(latencies, 99),
        "p99_first_third": _percentile(thirds[0], 99),
        "p99_last_third": _percentile(thirds[1], 99),
        "mean": statistics.fmean(latencies) if latencies else float("nan"),
        "latencies": latencies,
        "duplicates": seen.duplicates(),
        "order_violations": seen.order_violations(),
        "problems": problems,
    }


def inbox(
    ctx: Context, system: System, topic: str, distinct: int, sent: int, timeout: float
) -> dict[str, Any]:
    run_db = _db(ctx, system, "run")
    ensure_templates(ctx, system)
    ctx.pg.recreate(run_db, template=_db(ctx, system, "empty"))
    command, extra = system.inbox_cmd(topic)
    env = procs.base_env(**system.env(ctx.pg.url(run_db), **extra))
    child = procs.Child(command, env, ctx.logs / f"{system.name}-inbox.log", ctx.logs)
    table = system.inbox_table()
    deadline = time.monotonic() + timeout
    stored = 0
    while time.monotonic() < deadline and child.alive():
        stored = int(ctx.pg.fetchrow(run_db, f"SELECT count(*) FROM {table}")[0])
        if stored >= distinct:
            break
        time.sleep(0.5)
    time.sleep(1.0)  # anything past `distinct` would be a stored duplicate
    problems = _stop_all([child])
    row = ctx.pg.fetchrow(
        run_db,
        f"SELECT count(*), count(DISTINCT uuid), "
        f"EXTRACT(EPOCH FROM max(created_at) - min(created_at)) FROM {table}",
    )
    ctx.pg.drop(run_db)
    rows, unique, span = int(row[0]), int(row[1]), float(row[2] or 0.0)
    return {
        "system": system.name,
        "sent": sent,
        "distinct": distinct,
        "stored": rows,
        "stored_duplicates": rows - unique,
        "lost": distinct - unique,
        "rate": rows / span if span > 0 else 0.0,
        "consumed_rate": sent * rows / distinct / span if span > 0 else 0.0,
        "problems": problems,
    }


def create_cost(ctx: Context, system: System, seconds: float, rounds: int) -> dict[str, Any]:
    run_db = _db(ctx, system, "run")
    ensure_templates(ctx, system)
    ctx.pg.recreate(run_db, template=_db(ctx, system, "empty"))
    env = procs.base_env(**system.env(ctx.pg.url(run_db)))
    output = procs.run(
        system.create_cost_cmd(seconds, rounds, ctx.size),
        env,
        ctx.logs / f"{system.name}-create-cost.log",
        ctx.logs,
    )
    ctx.pg.drop(run_db)
    result: dict[str, list[float]] = json.loads(
        [line for line in output.splitlines() if line.startswith("{")][-1]
    )
    without, with_ = statistics.median(result["without"]), statistics.median(result["with"])
    return {
        "system": system.name,
        "without": without,
        "with": with_,
        "overhead_pct": (without / with_ - 1) * 100 if with_ else float("nan"),
        "rounds": result,
    }
