"""`capture_created()`: the items created in this process while a block runs, reported
when their transaction commits (a rolled back transaction or savepoint drops its items).

It listens to `create()` (creation/items.py CREATE_LISTENERS) and to the session's commit
and rollback events; no Kafka, no worker.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session, SessionTransaction

from outbox_engine.config.registry import Box
from outbox_engine.contracts.events import decode_event
from outbox_engine.creation import items as create_module
from outbox_engine.creation.ids import new_message_id
from outbox_engine.middleware import NewItem

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
            message_id=item.uuid or new_message_id(),
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
