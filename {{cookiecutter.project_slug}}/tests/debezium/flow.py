"""The steps the Debezium tests share: load through the service's own `create()` path (the
guarantees suite's `write_sequences`: per key, items with `seq` 0, 1, 2 ... from concurrent
transactions), the drain (every item committed so far is on the topic), and
the audit (the guarantees suite's: lost, phantom, per-key order of first deliveries,
duplicates) with its verdict."""

from __future__ import annotations

import asyncio
import time

from sqlalchemy import select

from ..guarantees.audit import audit
from ..guarantees.load import Load, Stats, write_sequences
from ..guarantees.report import Row
from ..support import OutboxItem
from .harness import DebeziumService
from .messages import keys_on_several_partitions, read_messages, wait_on_topic


async def load(service: DebeziumService, plan: Load, stats: Stats | None = None) -> Stats:
    stats = stats or Stats()
    await write_sequences(service.container, plan, stats)
    return stats


async def drain(service: DebeziumService, within: float = 120.0) -> float:
    """Seconds until every item committed so far is on the topic (read from the start; an
    item missing after `within` seconds is left for the audit to count as lost)."""
    started = time.monotonic()
    async with service.container.session_factory()() as session:
        created = {str(u) for u in (await session.execute(select(OutboxItem.uuid))).scalars()}
    await asyncio.to_thread(wait_on_topic, service.bootstrap, service.topic, created, within)
    return time.monotonic() - started


async def audited(service: DebeziumService, label: str, started: float) -> Row:
    """The guarantees audit of the service's topic (no inbox side), with the test's label,
    its seconds and a note of keys found on more than one partition (facts)."""
    row = await audit(service.container, service.bootstrap, service.topic, [])
    row.scenario = label
    row.seconds = time.monotonic() - started
    messages = read_messages(
        service.bootstrap,
        service.topic,
        expect=row.delivered + row.duplicated + row.phantom,
        settle=0.5,
    )
    row.facts["keys_on_several_partitions"] = len(keys_on_several_partitions(messages))
    timings = ", ".join(f"{k} {v:.1f}s" for k, v in service.timings.items())
    row.notes.append(f"timings: {timings}")
    return row


def failures(row: Row, planned: int) -> list[str]:
    """What breaks the relay's guarantees, as readable failures."""
    found = []
    if row.created < planned:
        found.append(f"created {row.created} < {planned} planned")
    if row.lost:
        found.append(f"lost {row.lost} committed items")
    if row.phantom:
        found.append(f"{row.phantom} messages on the topic were never committed")
    if row.out_of_order:
        found.append(f"{row.out_of_order} per-key order violations of first deliveries")
    spread = row.facts.get("keys_on_several_partitions", 0)
    if spread:
        found.append(
            f"{spread} keys landed on more than one partition (the relays partition keys "
            "differently: per-key order is lost for consumers)"
        )
    return found
