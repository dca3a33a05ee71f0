"""The public test helpers (outbox_engine/testing/) on the real database: what they capture,
drain and feed, counted."""

from __future__ import annotations

import uuid
from collections import defaultdict
from typing import Any, ClassVar

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.contracts.events import Event, EventTypes
from outbox_engine.creation.items import Outbox
from outbox_engine.store.status import ItemStatus
from outbox_engine.testing import capture_created, drain, feed
from outbox_engine.transports.base import (
    EventHandler,
    ItemRecord,
    PermanentFailure,
)
from outbox_engine.transports.resources import Resources

from ..support import INBOX_BOX, OUTBOX_BOX, InboxItem, OutboxItem, make_registry


class Noted(Event):
    event_name: ClassVar[str] = "noted"
    n: int
    text: str


class Refund(Event):
    event_name: ClassVar[str] = "refund"
    order_id: int
    amount: float


HANDLED: list[Refund] = []


class RefundHandler(EventHandler[Refund]):
    """Notes each refund in the outbox; 13 fails after noting (a retryable error), above
    1000 fails for good."""

    outbox: Outbox

    async def setup(self, resources: Resources) -> None:
        self.outbox = resources.outbox

    async def handle_event(self, item: ItemRecord, event: Refund, session: AsyncSession) -> None:
        HANDLED.append(event)
        await self.outbox.create(
            session,
            OutboxItem,
            event_key=event.order_id,
            event_name="refund_noted",
            payload={"amount": event.amount},
        )
        if event.amount == 13:
            raise RuntimeError("unlucky amount")
        if event.amount > 1000:
            raise PermanentFailure("refund above the limit")


@pytest.fixture
def typed_outbox(container: Container, monkeypatch: pytest.MonkeyPatch) -> Outbox:
    """An Outbox whose outbox box declares `Noted` (the session's registry, built first,
    keeps the configured models)."""
    container.registry()
    monkeypatch.setattr(OutboxItem, "event_types", EventTypes(Noted))
    return Outbox(make_registry())


async def count(container: Container, model: type[Any], status: int | None = None) -> int:
    query = select(func.count()).select_from(model)
    if status is not None:
        query = query.where(model.status == status)
    async with container.session_factory()() as session:
        return int((await session.execute(query)).scalar_one())


async def test_capture_reports_committed_items_with_their_typed_payloads(
    container: Container, typed_outbox: Outbox
) -> None:
    with capture_created() as created:
        async with container.session_factory()() as session, session.begin():
            for n in range(3):
                await typed_outbox.create(
                    session, OutboxItem, event_key=n, payload=Noted(n=n, text=f"t{n}")
                )
            savepoint = await session.begin_nested()  # rolls back: its item goes
            await typed_outbox.create(
                session, OutboxItem, event_key=9, payload=Noted(n=9, text="gone")
            )
            await savepoint.rollback()
        async with container.session_factory()() as session:  # rolls back: nothing
            await session.begin()
            await typed_outbox.create(
                session, OutboxItem, event_key=8, payload=Noted(n=8, text="gone")
            )
            await session.rollback()
    assert await count(container, OutboxItem) == 3
    assert len(created) == 3
    assert [i.event_key for i in created] == ["0", "1", "2"]
    item = created.one(event_key="1")
    assert (item.box, item.event_name) == (OUTBOX_BOX, "noted")
    assert item.event == Noted(n=1, text="t1")
    assert item.data == {"n": 1, "text": "t1"}
    assert item.payload == b'{"n":1,"text":"t1"}'
    assert item.headers["content-type"] == "application/json"
    assert item.headers["schema-version"] == "1"
    with pytest.raises(AssertionError, match=r"expected one item matching .* found 3"):
        created.one(event_name="noted")
    # Nothing is captured after the block.
    async with container.session_factory()() as session, session.begin():
        await typed_outbox.create(session, OutboxItem, event_key=5, payload=Noted(n=5, text="x"))
    assert len(created) == 3


async def test_drain_relays_every_item_to_a_recording_transport(container: Container) -> None:
    outbox = container.outbox()
    async with container.session_factory()() as session, session.begin():
        for n in range(60):
            await outbox.create(
                session, OutboxItem, event_key=n % 7, event_name="counted", payload={"n": n}
            )
    delivered = await drain(container, OUTBOX_BOX)
    assert len(delivered) == 60
    assert await count(container, OutboxItem, ItemStatus.DELIVERED) == 60
    per_key: dict[str, list[int]] = defaultdict(list)
    for d in delivered:
        per_key[d.item.event_key].append(d.data["n"])
    assert per_key == {str(k): list(range(k, 60, 7)) for k in range(7)}
    # Drained already: a second run hands over nothing.
    assert await drain(container, OUTBOX_BOX) == []


async def test_feed_returns_each_outcome_of_a_typed_handler(container: Container) -> None:
    handler = {"class": f"{__name__}:RefundHandler", "event_name": "refund"}
    registry = make_registry(inbox={"transports": [handler]})
    HANDLED.clear()

    paid = await feed(
        container, INBOX_BOX, payload=Refund(order_id=4, amount=5.5), registry=registry
    )
    assert (paid.status, paid.attempts, paid.last_error) == (ItemStatus.DELIVERED, 1, None)
    assert [Refund(order_id=4, amount=5.5)] == HANDLED
    assert [(c.box, c.event_name, c.event_key, c.data) for c in paid.created] == [
        (OUTBOX_BOX, "refund_noted", "4", {"amount": 5.5})
    ]

    malformed = await feed(
        container, INBOX_BOX, event_name="refund", payload={"order_id": 4}, registry=registry
    )
    assert (malformed.status, malformed.attempts, malformed.created) == (ItemStatus.FAILED, 1, [])
    reason = "PermanentFailure: malformed refund payload: amount: Field required"
    assert malformed.last_error == reason

    refused = await feed(
        container, INBOX_BOX, payload=Refund(order_id=5, amount=5000), registry=registry
    )
    assert (refused.status, refused.created) == (ItemStatus.FAILED, [])
    assert refused.last_error == "PermanentFailure: refund above the limit"

    # Fails after creating an item: the item rolls back with the handler's savepoint.
    unlucky = await feed(
        container, INBOX_BOX, payload=Refund(order_id=6, amount=13), registry=registry
    )
    assert (unlucky.status, unlucky.attempts) == (ItemStatus.PENDING, 1)
    assert unlucky.last_error == "RuntimeError: unlucky amount"
    assert unlucky.created == []
    assert len(HANDLED) == 3  # the malformed one never reached the handler

    # One outbox item in all: the delivered refund's.
    assert await count(container, OutboxItem) == 1
    assert await count(container, InboxItem) == 4


async def test_feeding_one_message_id_twice_stores_it_once(container: Container) -> None:
    handler = {"class": f"{__name__}:RefundHandler", "event_name": "refund"}
    registry = make_registry(inbox={"transports": [handler]})
    HANDLED.clear()
    message_id = uuid.uuid4()
    first = await feed(
        container,
        INBOX_BOX,
        payload=Refund(order_id=1, amount=1),
        message_id=message_id,
        registry=registry,
    )
    again = await feed(
        container,
        INBOX_BOX,
        payload=Refund(order_id=1, amount=1),
        message_id=message_id,
        registry=registry,
    )
    assert first.status == again.status == ItemStatus.DELIVERED
    assert again.created == []
    assert len(HANDLED) == 1
    assert await count(container, InboxItem) == 1
    async with container.session_factory()() as session:
        headers = (await session.execute(select(InboxItem.headers))).scalar_one()
    assert headers["message-id"] == str(message_id)
    assert headers["event-name"] == "refund"
    assert headers["content-type"] == "application/json"
