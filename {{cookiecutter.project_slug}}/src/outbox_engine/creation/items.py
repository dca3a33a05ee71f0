"""Creating outbox items inside the caller's transaction.

    async with session.begin():
        session.add(order)
        await outbox.create(session, OrderOutboxItem, event_key=order.id,
                            payload=OrderCreated(id=order.id, ...))

The rows are inserted on the caller's session, so they commit or roll back with the
business change. A NOTIFY in the same transaction wakes the workers when it commits.

A payload is an event model instance (its event name is the one the box's `EventTypes`
gives its class, or the model's `event_name`), a dict/list (compact JSON), str or bytes. A
payload of an event whose box declares a model is validated against it here, once (see
events.py), and gets the `content-type` and `schema-version` headers.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from outbox_engine.config.registry import Box, BoxRegistry
from outbox_engine.contracts.events import encode_event
from outbox_engine.creation.chain import chain_headers
from outbox_engine.creation.ids import new_message_id
from outbox_engine.creation.shards import (
    Category,
    ShardError,
    infer_shard_identifier,
    shard_headers,
)
from outbox_engine.middleware import CreateCall, CreateMiddleware, NewItem, wrap_create
from outbox_engine.observability.observer import Observer
from outbox_engine.sharding.flush_context import current_context
from outbox_engine.store.inserts import insert_items_statement

Payload = bytes | str | Mapping[str, Any] | Sequence[Any] | int | float | bool | BaseModel | None

RESERVED_HEADERS = frozenset({"correlation-id", "causation-id", "hop"})
# Called with (session, box, items) after items are inserted: how testing.capture_created
# sees them. Empty outside tests.
CREATE_LISTENERS: list[Callable[[AsyncSession, Box, Sequence[NewItem]], None]] = []


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise TypeError(f"payload value of type {type(value).__name__} is not JSON serialisable")


def encode_payload(payload: Payload) -> bytes:
    """bytes pass through, str is UTF-8, a model is its JSON, anything else compact JSON."""
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, str):
        return payload.encode("utf-8")
    if isinstance(payload, BaseModel):
        payload = payload.model_dump(mode="json")
    return json.dumps(payload, separators=(",", ":"), default=_json_default).encode("utf-8")


class Outbox:
    """The create API, one per process (wired by the container)."""

    def __init__(
        self,
        registry: BoxRegistry,
        middlewares: Sequence[CreateMiddleware] = (),
        observer: Observer | None = None,
    ) -> None:
        self._registry = registry
        self._run = wrap_create(list(middlewares), self._insert)
        self._observer = observer or Observer()

    async def create(
        self,
        session: AsyncSession,
        item_class: type[Any],
        *,
        event_key: str | int,
        event_name: str | None = None,
        payload: Payload,
        headers: Mapping[str, str] | None = None,
        message_id: uuid.UUID | None = None,
    ) -> uuid.UUID:
        """Add one item to the caller's transaction and return its message id. The event
        name may be left out when the payload is an event model instance."""
        box = self._registry.for_item_class(item_class)
        item = self._new_item(box, event_key, event_name, payload, headers, message_id)
        ids = await self._run(CreateCall(box=box, session=session, items=[item], is_batch=False))
        return ids[0]

    async def create_batch(
        self,
        session: AsyncSession,
        item_class: type[Any],
        items: Sequence[Mapping[str, Any]],
    ) -> list[uuid.UUID]:
        """Add several items in one statement; each mapping takes the arguments of `create`."""
        if not items:
            return []
        box = self._registry.for_item_class(item_class)
        new_items = []
        for index, spec in enumerate(items):
            unknown = set(spec) - {"event_key", "event_name", "payload", "headers", "message_id"}
            if unknown:
                raise TypeError(f"create_batch item {index}: unknown keys {sorted(unknown)}")
            try:
                new_items.append(
                    self._new_item(
                        box,
                        spec["event_key"],
                        spec.get("event_name")
                        if isinstance(spec.get("payload"), BaseModel)
                        else spec["event_name"],
                        spec.get("payload"),
                        spec.get("headers"),
                        spec.get("message_id"),
                    )
                )
            except KeyError as exc:
                raise TypeError(f"create_batch item {index}: missing {exc.args[0]!r}") from None
            except ValueError as exc:
                raise type(exc)(f"create_batch item {index}: {exc}") from None
        return await self._run(CreateCall(box=box, session=session, items=new_items, is_batch=True))

    async def create_for(
        self,
        session: AsyncSession,
        item_class: type[Any],
        category: Category,
        *,
        payload: Payload,
        shard_identifier: str | int | None = None,
        object_identifier: str | int | None = None,
        instance: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> uuid.UUID:
        """Create an item of a category: its shard identifier is the partition key, inferred
        from `instance` by the category's scope unless given; the object identifier (for
        coalescing) defaults to the instance's `id`."""
        if shard_identifier is None:
            if instance is None:
                raise ShardError(f"category {category.name}: give shard_identifier= or instance=")
            shard_identifier = infer_shard_identifier(category.scope, instance)
        if object_identifier is None:
            object_identifier = getattr(instance, "id", None)
            if object_identifier is None:
                raise ShardError(
                    f"category {category.name}: give object_identifier= (the instance has no id)"
                )
        box = self._registry.for_item_class(item_class)
        item = self._new_item(box, shard_identifier, category.name, payload, headers, None)
        item.headers.update(shard_headers(category, object_identifier))
        ids = await self._run(CreateCall(box=box, session=session, items=[item], is_batch=False))
        return ids[0]

    @staticmethod
    def _new_item(
        box: Box,
        event_key: str | int,
        event_name: str | None,
        payload: Payload,
        headers: Mapping[str, str] | None,
        message_id: uuid.UUID | None,
    ) -> NewItem:
        key = str(event_key)
        if not key or len(key) > 255:
            raise ValueError("event_key must be 1-255 characters")
        if event_name is None and isinstance(payload, BaseModel):
            event_name = box.event_types.name_of(type(payload)) or getattr(
                payload, "event_name", None
            )
        if not isinstance(event_name, str) or not event_name or len(event_name) > 255:
            raise ValueError(
                "event_name must be 1-255 characters (it may be left out only for an event "
                "model whose box declares it or that names its event)"
            )
        user_headers = dict(headers or {})
        clash = RESERVED_HEADERS.intersection(user_headers)
        if clash:
            raise ValueError(f"headers {sorted(clash)} are set by the engine")
        encoded, event_headers = encode_event(
            event_name, box.event_types.model_for(event_name), payload
        )
        return NewItem(
            event_key=key,
            event_name=event_name,
            payload=encode_payload(payload) if encoded is None else encoded,
            headers={**event_headers, **user_headers} if event_headers else user_headers,
            uuid=message_id,
        )

    async def _insert(self, call: CreateCall) -> list[uuid.UUID]:
        box = call.box
        if box.kind != "outbox":
            raise ValueError(f"box {box.name} is an inbox; items are created in it by the consumer")
        ids: list[uuid.UUID] = []
        buckets: list[int] = []
        headers: list[str] = []
        for item in call.items:
            message_id = item.uuid or new_message_id()
            item.uuid = message_id
            item.bucket = box.bucket_for(item.event_key)
            ids.append(message_id)
            buckets.append(item.bucket)
            headers.append(json.dumps({**item.headers, **chain_headers(message_id)}))
        # The rows and the NOTIFY that wakes the workers in one statement: one round trip.
        await call.session.execute(
            insert_items_statement(box.table_name),
            {
                "uuids": ids,
                "names": [i.event_name for i in call.items],
                "keys": [i.event_key for i in call.items],
                "buckets": buckets,
                "payloads": [i.payload for i in call.items],
                "headers": headers,
                "channel": box.channel,
                "buckets_woken": _wake_payload(buckets),
            },
        )
        for listener in CREATE_LISTENERS:
            listener(call.session, box, call.items)
        context = current_context()
        if context is not None and context.flush:
            context.created.extend((box, message_id) for message_id in ids)
        pending_created(call.session).append(
            (self._observer, box, [i.event_name for i in call.items])
        )
        return ids


def _wake_payload(buckets: list[int]) -> str:
    """The NOTIFY payload: the buckets that got items, so that only the worker lanes of
    those buckets wake ('' wakes every lane: used when there are many)."""
    distinct = sorted(set(buckets))
    return ",".join(map(str, distinct)) if len(distinct) <= 64 else ""


CREATED_KEY = "outbox_created"


def pending_created(session: AsyncSession) -> list[tuple[Observer, Box, list[str]]]:
    """Items created in the session's current transaction, reported when it commits."""
    pending: list[tuple[Observer, Box, list[str]]] = session.sync_session.info.setdefault(
        CREATED_KEY, []
    )
    return pending


@event.listens_for(Session, "after_commit")
def _report_created(session: Session) -> None:
    for observer, box, names in session.info.pop(CREATED_KEY, []):
        observer.created(box, names)


@event.listens_for(Session, "after_rollback")
def _forget_created(session: Session) -> None:
    session.info.pop(CREATED_KEY, None)
