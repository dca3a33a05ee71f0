"""The example domain's HTTP contract: each write commits its outbox item with it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy import select

from {{ cookiecutter.package_name }}.api.app import create_app
from {{ cookiecutter.package_name }}.container import Container

from ..support import OutboxItem, make_registry, read_topic, running_worker, wait_for


@pytest.fixture
async def client(container: Container) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(container)  # lifespan not run: the session container owns the resources
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        yield client


async def outbox_items(container: Container) -> list[OutboxItem]:
    async with container.session_factory()() as session:
        return list((await session.execute(select(OutboxItem).order_by(OutboxItem.id))).scalars())


async def test_create_update_get(client: httpx.AsyncClient, container: Container) -> None:
    created = await client.post("/orders", json={"customer_id": "c-1", "amount": 12.5})
    assert created.status_code == 201
    order = created.json()
    assert (order["status"], order["version"], order["paid_amount"], order["amount"]) == (
        "created",
        1,
        0,
        12.5,
    )
    updated = await client.patch(f"/orders/{order['id']}", json={"status": "paid"})
    assert updated.status_code == 200
    assert (updated.json()["status"], updated.json()["version"]) == ("paid", 2)
    fetched = await client.get(f"/orders/{order['id']}")
    assert fetched.status_code == 200
    assert fetched.json()["version"] == 2

    items = await outbox_items(container)
    assert [(i.event_name, i.event_key) for i in items] == [
        ("order_created", str(order["id"])),
        ("order_updated", str(order["id"])),
    ]
    payloads = [json.loads(i.payload) for i in items]
    assert [(p["id"], p["version"], p["status"]) for p in payloads] == [
        (order["id"], 1, "created"),
        (order["id"], 2, "paid"),
    ]


async def test_rejected_requests_create_nothing(
    client: httpx.AsyncClient, container: Container
) -> None:
    assert (
        await client.post("/orders", json={"customer_id": "c", "amount": -1})
    ).status_code == 422
    assert (await client.post("/orders", json={"amount": 1})).status_code == 422
    assert (await client.patch("/orders/999999", json={"status": "paid"})).status_code == 404
    assert (await client.get("/orders/999999")).status_code == 404
    assert await outbox_items(container) == []


async def test_order_events_reach_the_orders_topic(
    client: httpx.AsyncClient, container: Container, env_topics: str
) -> None:
    ids = [
        (await client.post("/orders", json={"customer_id": f"c{i}", "amount": 1})).json()["id"]
        for i in range(5)
    ]
    for order_id in ids:
        await client.patch(f"/orders/{order_id}", json={"status": "paid"})
    async with running_worker(container, make_registry()):
        await wait_for(lambda: _delivered(container, 10), within=30)
    received = read_topic(container.settings().kafka_bootstrap_servers, env_topics, expect=10)
    events = sorted(
        (int(m.key), json.loads(m.value)["version"], m.headers["event-name"]) for m in received
    )
    assert events == sorted(
        [(i, 1, "order_created") for i in ids] + [(i, 2, "order_updated") for i in ids]
    )


async def _delivered(container: Container, expected: int) -> bool:
    return sum(1 for i in await outbox_items(container) if i.status == 2) == expected
