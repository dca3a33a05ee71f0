"""Idle cost: a relay and an inbox consumer with nothing to do, and what they still cost.

Ours runs the service as a team with many boxes would: 10 boxes of 64 buckets (5 outbox
boxes, each with its own table and topic, and 5 inbox boxes, each with its own table and
input topic), one `<slug> worker` for all ten (2 lanes each) and one `<slug> consumer` for
the five inbox boxes. The boxes are the bake's own two, repeated: the extra tables are
`CREATE TABLE ... (LIKE <the bake's table> INCLUDING ALL)` and their item classes come from
a module written next to the logs (mapped on the bake's own `Base`). The baseline runs its
relay and its consumer (one table each; it has no boxes).

After `warmup` seconds the window opens. Over `idle_seconds`, from PostgreSQL's and the
kernel's own counters:
- statements/s: `pg_stat_statements` calls in the run database (every statement a client
  sent, BEGIN and COMMIT included), when the server preloads it (scripts/postgres.sh does);
  transactions/s from `pg_stat_database` always;
- CPU % of one core: the relay's and the consumer's (`/proc/<pid>/stat`), and of the
  PostgreSQL backends serving the run database.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import asyncpg
import yaml

from . import procs
from .context import Context
from .sizes import Sizes
from .systems import System

Case = dict[str, Any]
BOXES = 10  # half outbox, half inbox
BUCKETS = 64
LANES = 2

ITEMS_MODULE = '''"""Item classes of the idle scenario's extra boxes (written by bench/idle.py)."""

import importlib
import os

from outbox_engine import InboxItemMixin, OutboxItemMixin

Base = importlib.import_module(os.environ["BENCH_PACKAGE"] + ".db").Base
'''


def _items_module(workdir: Path, outbox: list[str], inbox: list[str]) -> str:
    lines = [ITEMS_MODULE]
    for kind, mixin, names in (
        ("Outbox", "OutboxItemMixin", outbox),
        ("Inbox", "InboxItemMixin", inbox),
    ):
        for i, name in enumerate(names):
            lines.append(
                f"\nclass Idle{kind}{i}({mixin}, Base):\n    __tablename__ = {name + 's'!r}\n"
            )
    module = "bench_idle_items"
    (workdir / f"{module}.py").write_text("".join(lines))
    return module


def boxes_file(system: System, workdir: Path, topics: list[str]) -> tuple[Path, list[str]]:
    """The bake's config/boxes.yaml with its outbox and inbox box each repeated BOXES / 2
    times (64 buckets, own table and topic); returns the file and the new tables' names."""
    assert system.project is not None
    raw = yaml.safe_load((system.project.root / "config" / "boxes.yaml").read_text())
    out_entry = raw["outbox"][system.project.outbox_box]
    in_entry = raw["inbox"][system.project.inbox_box]
    half = BOXES // 2
    outbox = [f"idle_outbox_{i}_item" for i in range(half)]
    inbox = [f"idle_inbox_{i}_item" for i in range(half)]
    module = _items_module(workdir, outbox, inbox)
    config: dict[str, Any] = {"outbox": {}, "inbox": {}}
    for i, name in enumerate(outbox):
        entry = {**out_entry, "item_class": f"{module}:IdleOutbox{i}", "bucket_count": BUCKETS}
        entry["transports"] = [
            {**t, "args": {**t.get("args", {}), "topic": topics[i]}}
            for t in out_entry["transports"]
        ]
        config["outbox"][name] = entry
    for i, name in enumerate(inbox):
        config["inbox"][name] = {
            **in_entry,
            "item_class": f"{module}:IdleInbox{i}",
            "bucket_count": BUCKETS,
            "topics": [topics[half + i]],
        }
    path = workdir / "boxes-idle.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path, [n + "s" for n in outbox + inbox]


async def _create_tables(url: str, system: System, tables: list[str]) -> None:
    assert system.project is not None
    like = {
        "outbox": system.project.outbox_box + "s",
        "inbox": system.project.inbox_box + "s",
    }
    conn = await asyncpg.connect(url)
    try:
        for table in tables:
            source = like["inbox" if table.startswith("idle_inbox") else "outbox"]
            await conn.execute(f"CREATE TABLE {table} (LIKE {source} INCLUDING ALL)")
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


STATEMENTS = """
SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)
"""
BACKENDS = "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()"


async def _counters(url: str, database: str) -> tuple[float | None, float, list[int]]:
    """(statements so far or None, transactions so far, backend pids) of `database`, read
    from another database (`url`, where the extension is created) so the read is not
    counted."""
    conn = await asyncpg.connect(url)
    try:
        xacts = await conn.fetchval(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1",
            database,
        )
        try:
            statements = await conn.fetchval(STATEMENTS, database)
        except asyncpg.PostgresError:  # the server does not preload pg_stat_statements
            statements = None
        pids = [r["pid"] for r in await conn.fetch(BACKENDS, database)]
        return (None if statements is None else float(statements)), float(xacts), pids
    finally:
        await conn.close()


def _cpu(pids: list[int]) -> dict[int, float]:
    return {pid: cpu for pid in pids if (cpu := procs.cpu_seconds(pid)) is not None}


def idle(ctx: Context, system: System, run_db: str, sizes: Sizes, case: Case) -> dict[str, Any]:
    url = ctx.pg.url(run_db, driver="postgresql")
    extra: dict[str, str] = {}
    children: list[procs.Child] = []
    if system.project is not None:
        topics = [ctx.topic(f"idle-{system.name}-{i}") for i in range(BOXES)]
        boxes, tables = boxes_file(system, ctx.logs, topics)
        asyncio.run(_create_tables(url, system, tables))
        extra = {"BOXES_FILE": str(boxes), "PYTHONPATH": str(ctx.logs)}
        env = procs.base_env(**system.env(ctx.pg.url(run_db), topics[0], **extra))
        relay = [str(system.project.script), "worker", "--concurrency", str(LANES)]
        consumer = [str(system.project.script), "consumer"]
        consumer_env = env
        boxes_count, buckets = BOXES, BUCKETS
    else:
        topic = ctx.topic(f"idle-{system.name}")
        env = procs.base_env(**system.env(ctx.pg.url(run_db), topic))
        relay = system.relay_cmd(topic)
        consumer, more = system.inbox_cmd(ctx.topic(f"idle-{system.name}-in"))
        consumer_env = {**env, **more}
        boxes_count, buckets = 1, 0
    problems: list[str] = []
    stats_db = f"bench_{ctx.run_id}_stats"
    ctx.pg.recreate(stats_db)
    stats = ctx.pg.url(stats_db, driver="postgresql")
    try:
        asyncio.run(ctx.pg.execute(stats_db, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"))
        children.append(
            procs.Child(relay, env, ctx.logs / f"{system.name}-idle-relay.log", ctx.logs)
        )
        children.append(
            procs.Child(
                consumer, consumer_env, ctx.logs / f"{system.name}-idle-consumer.log", ctx.logs
            )
        )
        time.sleep(sizes.idle_warmup)
        for child in children:
            if not child.alive():
                raise RuntimeError(f"{system.name} idle: a process exited early: {child.tail(20)}")
        statements0, xacts0, backends = asyncio.run(_counters(stats, run_db))
        own = [c.proc.pid for c in children]
        cpu0, pg0 = _cpu(own), _cpu(backends)
        started = time.monotonic()
        time.sleep(sizes.idle_seconds)
        seconds = time.monotonic() - started
        statements1, xacts1, backends1 = asyncio.run(_counters(stats, run_db))
        cpu1, pg1 = _cpu(own), _cpu(backends1)
        for child in children:
            if not child.alive():
                problems.append(f"a process exited during the window: {child.tail(20)}")
    finally:
        for child in children:
            child.stop()
        ctx.pg.drop(stats_db)
    relay_cpu = 100 * (cpu1.get(own[0], 0.0) - cpu0.get(own[0], 0.0)) / seconds
    consumer_cpu = 100 * (cpu1.get(own[1], 0.0) - cpu0.get(own[1], 0.0)) / seconds
    backend_cpu = 100 * sum(pg1[p] - pg0.get(p, 0.0) for p in pg1) / seconds
    statements = (
        None
        if statements0 is None or statements1 is None
        else (statements1 - statements0) / seconds
    )
    return {
        "system": system.name,
        "boxes": boxes_count,
        "buckets": buckets,
        "seconds": seconds,
        "statements_per_s": statements,
        "transactions_per_s": (xacts1 - xacts0) / seconds,
        "relay_cpu_pct": relay_cpu,
        "consumer_cpu_pct": consumer_cpu,
        "cpu_pct": relay_cpu + consumer_cpu,
        "backend_cpu_pct": backend_cpu,
        "backends": len(pg1),
        "problems": problems,
    }
