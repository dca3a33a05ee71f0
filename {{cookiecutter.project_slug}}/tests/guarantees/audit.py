"""The audit after a scenario: what was created, what reached the topic (lost, phantom,
duplicated, out of order per key), what the inbox stored and applied, as a `report.Row`;
and, for failure messages, where undelivered items sit and why retried items failed."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict

from sqlalchemy import func, select, text

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.store.status import ItemStatus

from ..support import InboxItem, OutboxItem, order_violations, read_topic
from .queries import count
from .report import Row
from .transports import EFFECTS_TABLE


async def describe_pending(container: Container) -> str:
    """Where undelivered items sit, for the failure message."""
    parts = []
    async with container.session_factory()() as session:
        for model in (OutboxItem, InboxItem):
            row = (
                await session.execute(
                    select(
                        func.count(),
                        func.count(func.distinct(model.bucket)),
                        func.max(model.errors_count),
                        func.max(model.next_attempt_at) > func.now(),
                        func.max(model.last_error),
                    ).where(model.status == int(ItemStatus.PENDING))
                )
            ).one()
            parts.append(
                f"{model.__tablename__}: {row[0]} pending in {row[1]} buckets, max errors "
                f"{row[2]}, waiting for backoff {row[3]}, an error: {str(row[4])[:160]}"
            )
    return "; ".join(parts)


async def retry_reasons(container: Container) -> str:
    """The commonest last errors of items delivered after a failed attempt."""
    reason = func.left(OutboxItem.last_error, 120)
    query = (
        select(reason, func.count())
        .where(OutboxItem.errors_count > 0)
        .group_by(reason)
        .order_by(func.count().desc())
        .limit(2)
    )
    async with container.session_factory()() as session:
        rows = (await session.execute(query)).all()
    return "; ".join(f"{reason} x{n}" for reason, n in rows) or "none recorded"


async def delivered_at_least(container: Container, expected: int) -> bool:
    return (
        await count(container, OutboxItem, OutboxItem.status == int(ItemStatus.DELIVERED))
        >= expected
    )


async def audit(container: Container, bootstrap: str, topic: str, inbox_ids: list[str]) -> Row:
    async with container.session_factory()() as session:
        created = {str(u) for u in (await session.execute(select(OutboxItem.uuid))).scalars()}
        effects = [
            str(u)
            for u in (
                await session.execute(text(f"SELECT message_id FROM {EFFECTS_TABLE}"))
            ).scalars()
        ]
        stored = [str(u) for u in (await session.execute(select(InboxItem.uuid))).scalars()]
    retried = await count(
        container,
        OutboxItem,
        OutboxItem.status == int(ItemStatus.DELIVERED),
        OutboxItem.errors_count > 0,
    )
    received = await asyncio.to_thread(
        read_topic, bootstrap, topic, expect=len(created), timeout=60, settle=1.0
    )
    on_topic = {m.headers.get("message-id", "") for m in received}
    sequences: dict[str, list[int]] = defaultdict(list)
    for message in received:
        try:
            body = json.loads(message.value)
        except ValueError:
            continue
        if isinstance(body, dict) and "seq" in body:
            sequences[message.key].append(int(body["seq"]))
    expected = set(inbox_ids)
    return Row(
        scenario="",
        created=len(created),
        delivered=len(on_topic & created),
        lost=len(created - on_topic),
        phantom=len(on_topic - created),
        out_of_order=order_violations(sequences),
        duplicated=len(received) - len(on_topic),
        inbox_expected=len(expected),
        inbox_stored=len(stored),
        inbox_effects=len(effects),
        # Ids stored or applied that were never produced, or produced and never stored/applied.
        inbox_mismatched=len(set(stored) ^ expected) + len(set(effects) ^ expected),
        retried=retried,
    )
