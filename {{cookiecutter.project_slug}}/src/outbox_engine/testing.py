"""Test helpers for your own tests (public API; docs/contracts.md shows each in use).

* `capture_created()`: the items the code under test created (box, key, event, headers,
  payload as bytes, JSON and typed event), reported when their transaction commits: items of
  a transaction or savepoint that rolled back are not. No Kafka involved.
* `drain(container, box)`: run a real worker on the box (the test database, its locks and
  claims, your handlers) until no item of the box is pending; an outbox box's transports are
  replaced by a recording one, so nothing reaches Kafka, and what it was handed is returned.
* `feed(container, box, payload=...)`: store a message in an inbox box as the consumer
  would (same row, headers lowercased, message id, `ON CONFLICT DO NOTHING`), run the
  worker until its first attempt ends, and return the outcome: status, attempts, reason, and
  the outbox items its handler created.

They take the `container` fixture of tests/conftest.py (a container on a migrated test
database). Use them where a test is about your code; the engine's own guarantees are tested
with Kafka and processes in tests/integration and tests/guarantees.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session, SessionTransaction

from outbox_engine.config.boxes import BoxesConfig
from outbox_engine.config.registry import Box, BoxRegistry
from outbox_engine.contracts.events import decode_event, encode_event
from outbox_engine.creation import items as create_module
from outbox_engine.middleware import NewItem
from outbox_engine.relay.app import build_worker
from outbox_engine.relay.options import WorkerOptions
from outbox_engine.store.probe_items import count_pending, item_state, store_inbox_message
from outbox_engine.store.status import ItemStatus
from outbox_engine.transports.base import ItemRecord, Transport
from outbox_engine.transports.resources import Resources


class _Settings(Protocol):
    @property
    def asyncpg_dsn(self) -> str: ...


class Container(Protocol):
    """What the helpers need of a service's dependency container (the service's
    `container.Container` has it): a session factory, the registry, the shared resources
    and the settings with the asyncpg DSN."""

    @property
    def session_factory(self) -> Callable[[], async_sessionmaker[AsyncSession]]: ...
    @property
    def registry(self) -> Callable[[], BoxRegistry]: ...
    @property
    def resources(self) -> Callable[[], Resources]: ...
    @property
    def settings(self) -> Callable[[], _Settings]: ...


M = TypeVar("M", bound=BaseModel)
_PENDING_KEY = "testing_captured"


@dataclass(frozen=True)
class CreatedItem:
    """One created item as the relay will send it."""

    box: str
    event_key: str
    event_name: str
    payload: bytes
    headers: dict[str, Any]
    message_id: uuid.UUID
    model: type[BaseModel] | None = None

    @property
    def data(self) -> Any:
        """The payload as JSON."""
        return json.loads(self.payload)

    @property
    def event(self) -> Any:
        """The payload parsed into the model its box declares for the event."""
        if self.model is None:
            raise LookupError(f"box {self.box} declares no model for {self.event_name}")
        return decode_event(self.model, self.event_name, self.payload)

    def parsed(self, model: type[M]) -> M:
        """The payload parsed into `model`."""
        parsed: M = decode_event(model, self.event_name, self.payload)
        return parsed


@dataclass
class Captured:
    """What `capture_created` saw, in creation order."""

    items: list[CreatedItem] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[CreatedItem]:
        return iter(self.items)

    def where(
        self, box: str | None = None, event_name: str | None = None, event_key: str | None = None
    ) -> list[CreatedItem]:
        return [
            i
            for i in self.items
            if (box is None or i.box == box)
            and (event_name is None or i.event_name == event_name)
            and (event_key is None or i.event_key == str(event_key))
        ]

    def one(self, **criteria: Any) -> CreatedItem:
        """The single item matching (`box=`, `event_name=`, `event_key=`); AssertionError
        listing what was created otherwise."""
        found = self.where(**criteria)
        if len(found) != 1:
            seen = ", ".join(f"{i.box}/{i.event_name}/{i.event_key}" for i in self.items)
            raise AssertionError(
                f"expected one item matching {criteria}, found {len(found)} among: {seen or 'none'}"
            )
        return found[0]


_ACTIVE: list[Captured] = []


def _on_insert(session: AsyncSession, box: Box, items: Sequence[NewItem]) -> None:
    if not _ACTIVE:
        return
    sync = session.sync_session
    transaction = sync.get_nested_transaction() or sync.get_transaction()
    created = [
        CreatedItem(
            box=box.name,
            event_key=item.event_key,
            event_name=item.event_name,
            payload=item.payload,
            headers=dict(item.headers),
            message_id=item.uuid or uuid.uuid4(),
            model=box.event_types.model_for(item.event_name),
        )
        for item in items
    ]
    sync.info.setdefault(_PENDING_KEY, []).append((transaction, list(_ACTIVE), created))


@event.listens_for(Session, "after_commit")
def _committed(session: Session) -> None:
    for _transaction, captures, created in session.info.pop(_PENDING_KEY, []):
        for captured in captures:
            captured.items.extend(created)


@event.listens_for(Session, "after_soft_rollback")
def _rolled_back(session: Session, previous: SessionTransaction) -> None:
    pending = session.info.get(_PENDING_KEY)
    if not pending:
        return
    kept = []
    for entry in pending:
        transaction: SessionTransaction | None = entry[0]
        while transaction is not None and transaction is not previous:
            transaction = transaction.parent
        if transaction is None:
            kept.append(entry)
    session.info[_PENDING_KEY] = kept


@contextmanager
def capture_created() -> Iterator[Captured]:
    """Collect the items created (and committed) in this process while the block runs::

    with capture_created() as created:
        await place_order(...)
    assert created.one(event_name="order_created").event.amount == 10.0
    """
    captured = Captured()
    _ACTIVE.append(captured)
    if _on_insert not in create_module.CREATE_LISTENERS:
        create_module.CREATE_LISTENERS.append(_on_insert)
    try:
        yield captured
    finally:
        _ACTIVE.remove(captured)


class RecordingTransport(Transport):
    """An outbox transport that records what it is handed and succeeds."""

    def __init__(self) -> None:
        self.delivered: list[tuple[ItemRecord, bytes]] = []

    async def __call__(self, item: ItemRecord, payload: bytes) -> bool:
        self.delivered.append((item, payload))
        return True


@dataclass(frozen=True)
class Delivered:
    """An item the recording transport was handed."""

    item: ItemRecord
    payload: bytes

    @property
    def data(self) -> Any:
        return json.loads(self.payload)


def _registry_for(base: BoxRegistry, box_name: str, record: bool) -> BoxRegistry:
    """`base`, or with `record` and an outbox box, its configuration again with the box's
    transports replaced by a `RecordingTransport`."""
    raw = base.config.model_dump(by_alias=True)
    if not (record and box_name in raw["outbox"]):
        return base
    path = f"{RecordingTransport.__module__}:{RecordingTransport.__qualname__}"
    raw["outbox"][box_name]["transports"] = [{"class": path}]
    return BoxRegistry(BoxesConfig.model_validate(raw))


async def _pending(container: Container, box: Box) -> int:
    async with container.session_factory()() as session:
        return await count_pending(session, box.table)


async def drain(
    container: Container,
    box: str,
    *,
    record: bool = True,
    within: float = 30.0,
    until: Callable[[], Awaitable[bool]] | None = None,
    registry: BoxRegistry | None = None,
) -> list[Delivered]:
    """Run a worker on `box` until none of its items is pending (or `until()`, an async
    predicate, holds); AssertionError after `within` seconds, with the count left. An
    outbox box relays to a `RecordingTransport` unless `record=False`; the items it was
    handed are returned, in the order handed. `registry` replaces the container's (e.g. a
    registry with other handlers for a test)."""
    registry = _registry_for(registry or container.registry(), box, record)
    target = registry.get(box)
    options = WorkerOptions(
        boxes=(box,), rebalance_interval=0.2, shutdown_timeout=10.0, application_name="test-drain"
    )
    worker = build_worker(
        registry, container.resources(), container.settings().asyncpg_dsn, options
    )
    task = asyncio.create_task(worker.run())
    deadline = time.monotonic() + within
    try:
        await asyncio.wait_for(worker.ready.wait(), within)
        while True:
            done = await until() if until is not None else await _pending(container, target) == 0
            if done:
                break
            if task.done():
                await task  # raises what stopped the worker
            if time.monotonic() > deadline:
                left = await _pending(container, target)
                raise AssertionError(f"box {box}: {left} items still pending after {within}s")
            await asyncio.sleep(0.05)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)
    recorded: list[Delivered] = []
    for bound in target.transports:
        if isinstance(bound.transport, RecordingTransport):
            recorded += [Delivered(i, p) for i, p in bound.transport.delivered]
    return recorded


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
    message_id = message_id or uuid.uuid4()
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
