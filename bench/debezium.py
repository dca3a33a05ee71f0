"""The Debezium relay beside the worker: system `ours-debezium`, the same bake as `ours`
with its outbox box set to `relay: debezium`, relayed by Debezium on the Kafka Connect of
`scripts/services-up.sh --with-connect` (TEST_CONNECT_URL).

Per timed run, on the run database the loop copied and settled (bench/loop.py):

1. `debezium-up` (bench/drivers/ours_debezium.py, in the project's venv, through the
   engine's API): the run's own publication and slot, the connector registered and
   running, its slot streaming, then the box switched to Debezium in one transaction.
2. drain: the switch itself hands the backlog over (its pending items copied to the capture
   table in one transaction: "N items committed at once"); msgs/s as for every system
   (distinct messages / first to last first-seen on the topic), plus the seconds from the
   switch's commit to the first and to the last message.
   steady: the switch handed over nothing and installed the trigger; the same paced load as
   for the worker, latency = first-seen on the topic - commit time, per item.
3. `debezium-down`, always: the connector deleted and the slot dropped (a slot left behind
   keeps WAL on the shared server). Names carry the run id and a counter, so they never
   meet the service's own (`<package>_outbox`) or another run's.

Drain runs once per repeat (the `w1` case): Debezium's PostgreSQL connector has one task,
so the worker-count cases have no Debezium counterpart.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import procs
from .context import PARTITIONS, Context
from .envs import Project
from .kafka_io import TopicReader
from .sizes import Sizes
from .systems import System

Case = dict[str, Any]
_COUNTER = itertools.count(1)
UP_TIMEOUT_S = 600.0


def boxes_file(project: Project, workdir: Path) -> Path:
    """The project's own config/boxes.yaml with `relay: debezium` for the outbox box."""
    text = (project.root / "config" / "boxes.yaml").read_text()
    head = f"\n  {project.outbox_box}:\n"
    if text.count(head) != 1:
        raise RuntimeError(f"config/boxes.yaml: no single entry {head.strip()!r}")
    path = workdir / "boxes-debezium.yaml"
    path.write_text(text.replace(head, f"{head}    relay: debezium\n"))
    return path


def _names(ctx: Context) -> str:
    return f"bench_{ctx.run_id}_dbz_{next(_COUNTER)}"


@dataclass
class Relay:
    """A registered connector for one run: what `debezium-up` printed (`committed_at`,
    `copied`, `register_s`) and what went wrong taking it down."""

    up: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


@contextmanager
def relay(ctx: Context, system: System, env: dict[str, str], label: str) -> Iterator[Relay]:
    """debezium-up before the block, debezium-down after it, whatever happened inside."""
    names = _names(ctx)
    found = Relay()
    try:
        output = procs.run(
            system.driver_cmd("debezium-up", "--names", names),
            env,
            ctx.logs / f"{system.name}-{label}-up.log",
            ctx.logs,
            timeout=UP_TIMEOUT_S,
        )
        found.up = json.loads([x for x in output.splitlines() if x.startswith("{")][-1])
        yield found
    finally:
        try:
            procs.run(
                system.driver_cmd("debezium-down", "--names", names),
                env,
                ctx.logs / f"{system.name}-{label}-down.log",
                ctx.logs,
                timeout=180,
            )
        except RuntimeError as exc:
            found.problems.append(f"debezium-down {names}: {str(exc)[-500:]}")


def drain(ctx: Context, system: System, run_db: str, sizes: Sizes, case: Case) -> dict[str, Any]:
    backlog = sizes.backlog
    topic = ctx.topic(f"drain-{system.name}")
    reader = TopicReader(ctx.bootstrap, topic, PARTITIONS, backlog)
    reader.start()
    env = procs.base_env(**system.env(ctx.pg.url(run_db), topic))
    try:
        with relay(ctx, system, env, "drain") as connector:
            complete = reader.wait(sizes.drain_timeout)
    finally:
        reader.stop()
    up, problems = connector.up, connector.problems
    seen = reader.result
    span = seen.span()
    committed: float = up["committed_at"]
    first = min(seen.first_at.values()) if seen.first_at else float("nan")
    last = max(seen.first_at.values()) if seen.first_at else float("nan")
    if up["copied"] != backlog:
        problems.append(f"the switch handed over {up['copied']} items, not {backlog}")
    return {
        "system": system.name,
        "workers": case["workers"],
        "backlog": backlog,
        "delivered": seen.distinct,
        "complete": complete,
        "lost": backlog - seen.distinct if complete or sizes.drain_timeout >= 600 else None,
        "capped": not complete,
        "rate": seen.distinct / span if span > 0 else 0.0,
        "wall": last - committed,
        "commit_to_first": first - committed,
        "commit_to_last": last - committed,
        "register_s": up["register_s"],
        "switch_s": up["switch_s"],
        "duplicates": seen.duplicates(),
        "order_violations": seen.order_violations(),
        "keyless": seen.keyless(),
        "problems": problems,
    }


def steady_delivery(
    ctx: Context,
    system: System,
    run_db: str,
    topic: str,
    reader: TopicReader,
    load: Callable[[dict[str, str]], None],
) -> list[str]:
    """The steady scenario's relay part for Debezium: up, the paced `load()` (the same as
    for the worker), give the reader its 15 s, down. Problems seen, if any."""
    env = procs.base_env(**system.env(ctx.pg.url(run_db), topic))
    label = topic.rsplit("-", 1)[0].removeprefix("bench-")
    try:
        with relay(ctx, system, env, label) as connector:
            if connector.up["copied"]:
                connector.problems.append(f"the switch handed over {connector.up['copied']} items")
            load(env)
            reader.wait(15.0)
    finally:
        reader.stop()
    return connector.problems
