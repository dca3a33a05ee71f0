"""The example inbox contract: payment_received adds to paid_amount and emits order_paid,
effectively once, whatever Kafka redelivers."""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from decimal import Decimal

from sqlalchemy import select

from {{ cookiecutter.package_name }}.container import Container
from {{ cookiecutter.package_name }}.domain.models import Order
from {{ cookiecutter.package_name }}.domain.service import create_order
from outbox_engine.store.status import ItemStatus

from ..support import (
    INBOX_BOX,
    InboxItem,
    KafkaMessage,
    make_registry,
    produce,
    read_topic,
    running_worker,
    wait_for,
)
from .test_inbox import running_consumer


async def test_payments_are_applied_once_and_emit_order_paid(
    container: Container, env_topics: str
) -> None:
    registry = make_registry()
    async with container.session_factory()() as session, session.begin():
        orders = [
            await create_order(session, container.outbox(), f"c{i}", Decimal(100)) for i in range(5)
        ]
    expected: dict[int, Decimal] = defaultdict(Decimal)
    messages: list[KafkaMessage] = []
    for n in range(60):
        order = orders[n % 5]
        amount = Decimal(n + 1) / 4
        expected[order.id] += amount
        headers = [("message-id", str(uuid.uuid4()).encode()), ("event-name", b"payment_received")]
        body = json.dumps({"order_id": order.id, "amount": float(amount)}).encode()
        messages.append((str(order.id), body, headers))
        if n % 10 == 0:
            messages.append((str(order.id), body, headers))  # a duplicate delivery
    # Keys of their own: the box keeps per-key order, so a poison message that fails for good
    # holds back what comes after it on its key (see test_relay's strict-order tests).
    poison: list[KafkaMessage] = [
        ("poison-1", b"not json", [("event-name", b"payment_received")]),
        (
            "poison-2",
            json.dumps({"order_id": 10**9, "amount": 5}).encode(),
            [("event-name", b"payment_received")],
        ),
    ]
    produce(container.settings().kafka_bootstrap_servers, f"{env_topics}-in", messages + poison)

    box = registry.get(INBOX_BOX)
    async with running_consumer(container, box), running_worker(container, registry):
        await wait_for(lambda: _inbox_done(container, 62), within=60)
        await wait_for(lambda: _outbox_done(container, 5 + 60), within=60)

    async with container.session_factory()() as session:
        paid = {o.id: o.paid_amount for o in (await session.execute(select(Order))).scalars()}
        inbox = list((await session.execute(select(InboxItem))).scalars())
    assert paid == dict(expected)
    assert len(inbox) == 62
    failed = sorted(i.last_error or "" for i in inbox if i.status == ItemStatus.FAILED)
    assert len(failed) == 2
    assert failed[0].startswith("PermanentFailure: malformed payment_received payload")
    assert failed[1] == f"PermanentFailure: order {10**9} does not exist"

    received = read_topic(container.settings().kafka_bootstrap_servers, env_topics, expect=65)
    paid_events = [m for m in received if m.headers["event-name"] == "order_paid"]
    assert len({m.headers["message-id"] for m in paid_events}) == 60
    inbox_ids = {str(i.uuid): i for i in inbox}
    for message in paid_events:
        parent = inbox_ids[message.headers["causation-id"]]
        assert message.headers["hop"] == "1"
        assert message.headers["correlation-id"] == parent.headers.get(
            "correlation-id", str(parent.uuid)
        )
        assert message.key == parent.event_key


async def _inbox_done(container: Container, expected: int) -> bool:
    async with container.session_factory()() as session:
        rows = (await session.execute(select(InboxItem.status))).scalars().all()
    return len(rows) == expected and all(
        s in (ItemStatus.DELIVERED, ItemStatus.FAILED) for s in rows
    )


async def _outbox_done(container: Container, expected: int) -> bool:
    from ..support import OutboxItem

    async with container.session_factory()() as session:
        rows = (await session.execute(select(OutboxItem.status))).scalars().all()
    return len(rows) == expected and all(s == ItemStatus.DELIVERED for s in rows)
