"""`feed(container, box, payload=...)`: store one message in an inbox box as the consumer
stores a Kafka message, let the worker handle it once (through `drain`), and return the
`Outcome`: status, attempts, last error, and the items its handler created."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from outbox_engine.config.registry import BoxRegistry
from outbox_engine.contracts.events import encode_event
from outbox_engine.creation import items as create_module
from outbox_engine.creation.ids import new_message_id
from outbox_engine.store.probe_items import item_state, store_inbox_message
from outbox_engine.store.status import ItemStatus
from outbox_engine.testing.capture import CreatedItem, capture_created
from outbox_engine.testing.drain import Container, drain


@dataclass(frozen=True)
class Outcome:
    """What became of a fed message after its first attempt."""

    status: ItemStatus
    attempts: int
    last_error: str | None
    message_id: uuid.UUID
    created: list[CreatedItem]

    @property
    def delivered(self) -> bool:
        return self.status is ItemStatus.DELIVERED


async def feed(
    container: Container,
    box: str,
    *,
    payload: Any,
    event_name: str | None = None,
    event_key: str | int | None = None,
    headers: Mapping[str, str] | None = None,
    message_id: uuid.UUID | None = None,
    within: float = 30.0,
    registry: BoxRegistry | None = None,
) -> Outcome:
    """Store one message in inbox `box` as the consumer stores a Kafka message (a model
    instance, dict, str or bytes as value), let the worker handle it once, and return the
    outcome. A message id fed twice is stored once, as with Kafka redeliveries. The key
    defaults to the message id: a key of its own, which no earlier failed item holds back
    (strict order: give keys to test ordering). `registry` replaces the container's (its
    handlers run)."""
    target = (registry or container.registry()).get(box)
    if target.kind != "inbox":
        raise ValueError(f"box {box} is not an inbox box")
    if event_name is None and isinstance(payload, BaseModel):
        event_name = target.event_types.name_of(type(payload)) or getattr(
            payload, "event_name", None
        )
    if not event_name:
        raise ValueError("give event_name (or a payload model that names its event)")
    encoded, event_headers = encode_event(event_name, None, payload)
    body = encoded if encoded is not None else create_module.encode_payload(payload)
    message_id = message_id or new_message_id()
    key = str(message_id if event_key is None else event_key)
    row_headers = {
        **{k.lower(): v for k, v in event_headers.items()},
        **{k.lower(): str(v) for k, v in (headers or {}).items()},
        "message-id": str(message_id),
        "event-name": event_name,
    }
    async with container.session_factory()() as session, session.begin():
        await store_inbox_message(
            session,
            target.table_name,
            message_id=message_id,
            event_name=event_name,
            event_key=key,
            bucket=target.bucket_for(key),
            payload=body,
            headers=row_headers,
            topic=target.inbox_config.topics[0],
        )

    async def attempted() -> bool:
        async with container.session_factory()() as session:
            state = await item_state(session, target.table, message_id)
        return state.status is not ItemStatus.PENDING or state.errors_count > 0

    with capture_created() as created:
        try:
            await drain(
                container, box, record=False, within=within, until=attempted, registry=registry
            )
        except AssertionError as exc:
            raise AssertionError(
                f"message {message_id} (key {key}) not handled within {within}s: is its key "
                f"held by an earlier item that failed or waits for a retry? ({exc})"
            ) from None
    async with container.session_factory()() as session:
        row = await item_state(session, target.table, message_id)
    return Outcome(
        status=row.status,
        attempts=row.errors_count + (1 if row.status is ItemStatus.DELIVERED else 0),
        last_error=row.last_error,
        message_id=message_id,
        created=list(created),
    )
