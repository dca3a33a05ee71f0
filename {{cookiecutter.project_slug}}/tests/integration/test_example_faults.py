"""The example domain under faults (marked slow): the promises of the orders and payments
contracts, measured with counts while processes are SIGKILLed."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import signal
import uuid
from collections import defaultdict
from decimal import Decimal

import httpx
import pytest
from sqlalchemy import func, select

from {{ cookiecutter.package_name }}.api.app import create_app
from {{ cookiecutter.package_name }}.container import Container
from {{ cookiecutter.package_name }}.domain.models import Order
from {{ cookiecutter.package_name }}.domain.service import create_order
from outbox_engine.store.status import ItemStatus

from ..support import (
    InboxItem,
    KafkaMessage,
    OutboxItem,
    order_violations,
    produce,
    read_topic,
    service_env,
    spawn,
    wait_for,
)
from .test_faults import stop

pytestmark = pytest.mark.slow


async def count(container: Container, model: object, *where: object) -> int:
    query = select(func.count()).select_from(model)  # type: ignore[arg-type]
    for clause in where:
        query = query.where(clause)  # type: ignore[arg-type]
    async with container.session_factory()() as session:
        return int((await session.execute(query)).scalar_one())


async def at_least(container: Container, expected: int, model: object, *where: object) -> bool:
    return await count(container, model, *where) >= expected


async def test_10000_order_events_survive_a_sigkilled_worker_in_key_order(
    container: Container, env_topics: str
) -> None:
    keys, total = 100, 10_000
    env = service_env(container)
    workers = [spawn(["worker"], env) for _ in range(2)]
    app = create_app(container)
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://t"
        ) as client:
            created = await asyncio.gather(
                *(
                    client.post("/orders", json={"customer_id": f"c{i}", "amount": 10})
                    for i in range(keys)
                )
            )
            ids = [r.json()["id"] for r in created]
            updates = [ids[i % keys] for i in range(total - keys)]
            random.Random(1).shuffle(updates)
            queue: asyncio.Queue[int] = asyncio.Queue()
            for order_id in updates:
                queue.put_nowait(order_id)
            killed = False
            # Every update sets an amount no order has had (a PATCH that changes nothing
            # emits nothing): 10.01, 10.02, ...
            amounts = (f"{cents // 100}.{cents % 100:02d}" for cents in itertools.count(1001))

            async def client_loop() -> None:
                nonlocal killed
                while not queue.empty():
                    order_id = queue.get_nowait()
                    response = await client.patch(
                        f"/orders/{order_id}", json={"amount": next(amounts)}
                    )
                    assert response.status_code == 200
                    if not killed and queue.qsize() < len(updates) // 2:
                        killed = True
                        workers[0].send_signal(signal.SIGKILL)  # midway, mid-batch
                        workers[0].wait(10)
                        workers[0] = spawn(["worker"], env)

            await asyncio.gather(*(client_loop() for _ in range(16)))
        assert killed
        delivered = OutboxItem.status == int(ItemStatus.DELIVERED)
        await wait_for(lambda: at_least(container, total, OutboxItem, delivered), within=180)
    finally:
        for worker in workers:
            stop(worker)
    received = read_topic(
        container.settings().kafka_bootstrap_servers, env_topics, expect=total, settle=2.0
    )
    versions: dict[str, list[int]] = defaultdict(list)
    for message in received:
        versions[message.key].append(json.loads(message.value)["version"])
    distinct = len({m.headers["message-id"] for m in received})
    print(
        f"\norders: created {total}, distinct on topic {distinct}, duplicates {len(received) - distinct}"
    )
    assert distinct == total
    assert len(versions) == keys
    assert order_violations(versions) == 0
    # Versions are 1..n per order with none missing.
    assert all(sorted(set(v)) == list(range(1, len(set(v)) + 1)) for v in versions.values())


async def test_20000_payments_with_duplicates_and_poison_survive_a_sigkilled_consumer(
    container: Container, env_topics: str
) -> None:
    orders_count, payments, poison_count = 50, 20_000, 10
    async with container.session_factory()() as session, session.begin():
        orders = [
            await create_order(session, container.outbox(), f"c{i}", Decimal(1000))
            for i in range(orders_count)
        ]
    expected: dict[int, Decimal] = defaultdict(Decimal)
    messages: list[KafkaMessage] = []
    rng = random.Random(2)
    for n in range(payments):
        order = orders[n % orders_count]
        amount = Decimal(rng.randint(1, 10_000)) / 100
        expected[order.id] += amount
        headers = [("message-id", str(uuid.uuid4()).encode()), ("event-name", b"payment_received")]
        body = json.dumps({"order_id": order.id, "amount": float(amount)}).encode()
        messages.append((str(order.id), body, headers))
    messages += rng.sample(messages, payments // 10)  # 10% duplicated
    # Poison on keys of their own: the inbox keeps per-key order, so a poison message that
    # fails for good holds back the later payments of its key until an operator acts.
    for n in range(poison_count):
        messages.append((f"poison-{n}", b"\xff not json", [("event-name", b"payment_received")]))
    rng.shuffle(messages)

    env = service_env(container)
    bootstrap = container.settings().kafka_bootstrap_servers
    consumers = [spawn(["consumer"], env) for _ in range(2)]
    workers = [spawn(["worker"], env)]
    try:
        half = len(messages) // 2
        await asyncio.to_thread(produce, bootstrap, f"{env_topics}-in", messages[:half])
        await wait_for(lambda: at_least(container, 2000, InboxItem), within=120)
        consumers[0].send_signal(signal.SIGKILL)
        consumers[0].wait(10)
        consumers[0] = spawn(["consumer"], env)
        await asyncio.to_thread(produce, bootstrap, f"{env_topics}-in", messages[half:])
        done = InboxItem.status.in_([int(ItemStatus.DELIVERED), int(ItemStatus.FAILED)])
        await wait_for(
            lambda: at_least(container, payments + poison_count, InboxItem, done), within=300
        )
        await asyncio.sleep(2)
    finally:
        for process in consumers + workers:
            stop(process)
    async with container.session_factory()() as session:
        paid = {o.id: o.paid_amount for o in (await session.execute(select(Order))).scalars()}
    assert await count(container, InboxItem) == payments + poison_count
    assert (
        await count(container, InboxItem, InboxItem.status == int(ItemStatus.FAILED))
        == poison_count
    )
    assert paid == dict(expected)
    order_paid = await count(container, OutboxItem, OutboxItem.event_name == "order_paid")
    assert order_paid == payments
