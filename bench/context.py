"""What every run of a benchmark shares: the services, the run's databases and topics.

Each system has two template databases, `<sys>_empty` (its schema) and `<sys>_backlog`
(schema + a filled backlog), and each timed run works on `<sys>_run`, a fresh copy of one
of them. Names carry a run id, so overlapping runs on shared services do not collide.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import procs
from .envs import log
from .kafka_io import create_topic, delete_topics
from .pg import Postgres
from .settle import settle_database
from .systems import System

PARTITIONS = 8


@dataclass
class Context:
    pg: Postgres
    bootstrap: str
    logs: Path
    keys: int
    size: int
    backlog: int = 0
    topics: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    inbox_topic: str = ""  # the pre-filled input of the inbox scenario
    inbox_sent: int = 0
    memory_topic: str | None = None  # the memory scenario's consumer input (bench/memory.py)
    # Templates a scenario builds on first use (bench/growth.py), dropped with the others.
    extra_databases: list[str] = field(default_factory=list)

    def database(self, system: System, kind: str) -> str:
        """bench_<run>_<system>_<kind>: kind empty, backlog, run, or a scenario's own
        template (growth, memory: see `built_template`)."""
        return f"bench_{self.run_id}_{system.name.replace('-', '_')}_{kind}"

    def databases(self, systems: list[System]) -> list[str]:
        kinds = ("empty", "backlog", "run")
        return [self.database(s, k) for s in systems for k in kinds] + self.extra_databases

    def topic(self, label: str) -> str:
        name = f"bench-{label}-{uuid.uuid4().hex[:8]}"
        create_topic(self.bootstrap, name, PARTITIONS)
        self.topics.append(name)
        return name

    def drop_topic(self, name: str) -> None:
        """Deletes one of the run's topics now rather than at `cleanup`."""
        delete_topics(self.bootstrap, [name])
        self.topics.remove(name)

    def cleanup(self) -> None:
        delete_topics(self.bootstrap, self.topics)
        self.topics.clear()


def prepare_templates(ctx: Context, system: System, backlog: int) -> procs.Child | None:
    """Create `<sys>_empty` (schema) and start filling `<sys>_backlog` (schema + backlog);
    the fill runs in the background and is returned so that systems fill in parallel."""
    empty, backlog_db = ctx.database(system, "empty"), ctx.database(system, "backlog")
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
    names = [ctx.database(system, "empty")]
    if ctx.backlog:
        names.append(ctx.database(system, "backlog"))
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


def built_template(
    ctx: Context, system: System, kind: str, fill: Callable[[str], None], what: str
) -> str:
    """A scenario's own template `kind` (growth: a table grown to N rows; memory: a large
    backlog), built the first time it is asked for: the system's empty schema copied, then
    `fill(database)`, then settled once. Dropped with the run's other databases."""
    name = ctx.database(system, kind)
    if name not in ctx.extra_databases:
        ctx.extra_databases.append(name)
    if ctx.pg.exists(name):
        return kind
    started = time.monotonic()
    ctx.pg.recreate(name, template=ctx.database(system, "empty"))
    fill(name)
    settle_database(ctx.pg, name)
    log(f"{system.name}: template with {what} built in {time.monotonic() - started:.0f} s")
    return kind
