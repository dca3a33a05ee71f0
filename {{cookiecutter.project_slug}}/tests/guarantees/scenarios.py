"""One guarantees scenario, run once: fresh topics and tables, the service's own processes
(supervise.py), the load (load.py), one fault once enough items are delivered, a drain,
then the audit (audit.py) that turns the outcome into numbers (report.Row)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import text

from {{ cookiecutter.package_name }}.container import Container, shutdown
from {{ cookiecutter.package_name }}.settings import Settings
from outbox_engine.store.status import ItemStatus

from ..support import ITEM_TABLES, InboxItem, OutboxItem, uncommitted, uncommitted_by_partition
from .audit import audit, delivered_at_least, describe_pending, retry_reasons
from .config_files import boxes_file
from .kafka_admin import create_topics
from .load import Load, Stats, inbox_messages, post_orders, produce_inbox, write_sequences
from .queries import count, wait_until
from .report import Row
from .supervise import Stack
from .transports import CREATE_EFFECTS_TABLE, EFFECTS_TABLE

# Once every inbox message is stored, the consumer group's offsets reach the topic's end
# within this (a consumer commits what did not hold when a fetch comes back empty).
COMMITTED_WITHIN = 30.0


@dataclass
class Scenario:
    name: str
    # Fault: runs concurrently with the load, once `fault_after` outbox items are delivered.
    fault: Callable[[Run], Awaitable[None]] | None = None
    fault_after: int = 500
    outbox: dict[str, Any] = field(default_factory=dict)  # box settings replaced
    inbox: dict[str, Any] = field(default_factory=dict)  # the inbox box's, likewise
    worker_env: dict[str, dict[str, str]] = field(default_factory=dict)
    worker_args: tuple[str, ...] = ()  # appended to both workers' command line
    cgroup: Path | None = None
    cgroup_members: tuple[str, ...] = ()
    drain_within: float = 150.0
    # Items whose id is a multiple of this get the scripted transport's trouble.
    scripted_every: int = 0
    topic_config: dict[str, str] = field(default_factory=dict)
    load: Load = field(default_factory=Load)
    # Facts read from the processes' logs once they stopped: fact name -> a pattern whose
    # first group is an integer, summed over every matching line (Stack.numbers_in_logs).
    log_numbers: dict[str, str] = field(default_factory=dict)


@dataclass
class Run:
    """What a fault can reach while the scenario runs."""

    scenario: Scenario
    stack: Stack
    container: Container
    bootstrap: str
    notes: list[str]
    stats: Stats
    facts: dict[str, int] = field(default_factory=dict)


async def fresh_tables(container: Container) -> None:
    async with container.engine().begin() as conn:
        await conn.execute(text(CREATE_EFFECTS_TABLE))
        tables = ", ".join([*ITEM_TABLES, EFFECTS_TABLE])
        await conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))


async def run_scenario(
    scenario: Scenario, database_url: str, bootstrap: str, workdir: Path
) -> tuple[Row, str]:
    """Run the scenario once; return its numbers and, for failure messages, process logs."""
    started = time.monotonic()
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    topic = f"g-{scenario.name}-{uuid.uuid4().hex[:8]}"
    boxes = boxes_file(workdir / "boxes.yaml", scenario, topic)
    await asyncio.to_thread(create_topics, bootstrap, [topic, f"{topic}-in"], scenario.topic_config)
    container = Container()
    container.settings.override(
        Settings(
            database_url=database_url,
            kafka_bootstrap_servers=bootstrap,
            boxes_file=boxes,
            log_format="text",
        )
    )
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "BOXES_FILE": str(boxes),
        "LOG_FORMAT": "text",
        "LOG_LEVEL": "WARNING",
        "OTEL_SDK_DISABLED": "true",
    }
    stack = Stack(
        workdir,
        env,
        scenario.worker_env,
        scenario.cgroup,
        scenario.cgroup_members,
        scenario.worker_args,
    )
    stats = Stats()
    notes: list[str] = []
    inbox_ids, messages = inbox_messages(scenario.load.inbox)
    drained = False
    facts: dict[str, int] = {}
    try:
        await fresh_tables(container)
        await stack.start()
        run = Run(scenario, stack, container, bootstrap, notes, stats, facts)
        load = asyncio.gather(
            write_sequences(container, scenario.load, stats),
            post_orders(stack.api_url, scenario.load, stats),
            produce_inbox(bootstrap, f"{topic}-in", messages, scenario.load),
        )
        if scenario.fault is not None:
            try:
                await wait_until(
                    lambda: delivered_at_least(container, scenario.fault_after), within=60
                )
                await scenario.fault(run)
            except BaseException:
                load.cancel()  # the fault's own error is the one to report
                await asyncio.gather(load, return_exceptions=True)
                raise
        await load

        async def settled() -> bool:
            pending = await count(
                container, OutboxItem, OutboxItem.status == int(ItemStatus.PENDING)
            )
            inbox_pending = await count(
                container, InboxItem, InboxItem.status == int(ItemStatus.PENDING)
            )
            stored = await count(container, InboxItem)
            return pending == 0 and inbox_pending == 0 and stored >= len(inbox_ids)

        drained = await wait_until(settled, within=scenario.drain_within)
        if not drained:
            notes.append(f"workers: {await stack.worker_health()}")
        else:
            # Every message stored: once the input runs dry the consumers commit it all,
            # whatever commits the fault made fail or undid (inbox/commits.py).
            # The last count the broker gave (None: never one) and the last failed read: a
            # count is reported only when the broker gave one, never made up.
            behind: dict[str, int | None] = {"now": None}
            failed: list[str] = []

            async def all_committed() -> bool:
                try:
                    behind["now"] = await asyncio.to_thread(
                        uncommitted, bootstrap, f"{topic}-in", f"{topic}-group"
                    )
                except Exception as exc:
                    failed[:] = [f"{type(exc).__name__}: {exc}"]
                    raise
                return behind["now"] == 0

            if not await wait_until(all_committed, within=COMMITTED_WITHIN):
                now = behind["now"]
                if now is None:
                    facts["offsets_unreadable"] = 1
                else:
                    facts["uncommitted"] = now
                    # Which partitions, and how far each: where to look next time.
                    with contextlib.suppress(Exception):
                        where = await asyncio.to_thread(
                            uncommitted_by_partition, bootstrap, f"{topic}-in", f"{topic}-group"
                        )
                        notes.append(f"uncommitted messages by partition: {where}")
                if failed:
                    notes.append(f"reading the committed offsets last failed: {failed[0]}")
    finally:
        await stack.stop()
    try:
        stuck = "" if drained else await describe_pending(container)
        row = await audit(container, bootstrap, topic, inbox_ids)
        if scenario.scripted_every:
            row.scripted = await count(
                container, OutboxItem, OutboxItem.id % scenario.scripted_every == 0
            )
        if row.retried:
            notes.append(f"retried items' last errors: {await retry_reasons(container)}")
    finally:
        # The tests that run after the suite share this database: leave the tables empty
        # (the lock-conn-killed and conn-killed scenarios leave 36,000 inbox rows otherwise).
        try:
            await fresh_tables(container)
        finally:
            await shutdown(container)
    for fact, pattern in scenario.log_numbers.items():
        facts[fact] = stack.numbers_in_logs(pattern)
    if scenario.log_numbers:
        said = ", ".join(f"{fact} {facts[fact]}" for fact in scenario.log_numbers)
        notes.append(f"from the processes' logs: {said}")
    # A Kafka client replaced for partitions it could not write (transports/kafka_stuck.py):
    # said in the report, so a run shows whether it took one.
    replaced = stack.count_in_logs("replaced the producer's client")
    if replaced:
        notes.append(f"kafka producer clients replaced: {replaced}")
    row.scenario = scenario.name
    row.restarts = stack.restarts
    row.seconds = time.monotonic() - started
    if not drained:
        facts["not_drained"] = 1
        notes.append(f"not drained within {scenario.drain_within:.0f}s: {stuck}")
    if stats.rejected_writes:
        reasons = ", ".join(f"{k} x{v}" for k, v in stats.errors.most_common(3))
        notes.append(f"{stats.rejected_writes} writes rejected during the fault ({reasons})")
    if stats.api_errors:
        codes = Counter(code for code, _ in stats.api_errors)
        notes.append(f"api answered {dict(codes)} to {len(stats.api_errors)} order requests")
    row.notes = notes
    row.facts = facts
    return row, stack.tails()
