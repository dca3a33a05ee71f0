"""The SQL of the public test helpers (testing/): count a box's pending items, store a
message in an inbox as the consumer does, and read one item's state by message id.

Test-only paths, kept here with the rest of the engine's SQL; the consumer's own insert is
its batched statement (inbox/consumer.py), which `store_inbox_message` matches row for row
(headers as JSONB, `ON CONFLICT (uuid) DO NOTHING`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import Table, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from outbox_engine.store.status import ItemStatus


@dataclass(frozen=True)
class ItemState:
    status: ItemStatus
    errors_count: int
    last_error: str | None


async def count_pending(session: AsyncSession, table: Table) -> int:
    """The box's pending items (every one, in backoff or not)."""
    query = select(func.count()).select_from(table).where(table.c.status == ItemStatus.PENDING)
    return int((await session.execute(query)).scalar_one())


async def store_inbox_message(
    session: AsyncSession,
    table: str,
    *,
    message_id: uuid.UUID,
    event_name: str,
    event_key: str,
    bucket: int,
    payload: bytes,
    headers: Mapping[str, str],
    topic: str,
) -> None:
    """Insert one inbox row (partition 0, offset 0 of `topic`) unless its message id is
    stored already, in the session's open transaction."""
    await session.execute(
        text(
            f"INSERT INTO {table} (uuid, event_name, event_key, bucket, payload, "
            "headers, source_topic, source_partition, source_offset) "
            "VALUES (:uuid, :event_name, :event_key, :bucket, :payload, "
            "CAST(:headers AS jsonb), :topic, 0, 0) ON CONFLICT (uuid) DO NOTHING"
        ),
        {
            "uuid": message_id,
            "event_name": event_name,
            "event_key": event_key,
            "bucket": bucket,
            "payload": payload,
            "headers": json.dumps(dict(headers)),
            "topic": topic,
        },
    )


async def item_state(session: AsyncSession, table: Table, message_id: uuid.UUID) -> ItemState:
    """Status, attempts that failed and last error of the item with `message_id`."""
    query = select(table.c.status, table.c.errors_count, table.c.last_error).where(
        table.c.uuid == message_id
    )
    row = (await session.execute(query)).one()
    return ItemState(ItemStatus(row.status), int(row.errors_count), row.last_error)
