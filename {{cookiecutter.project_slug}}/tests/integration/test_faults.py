"""Fault injection on real processes (marked slow): SIGKILLed workers and consumers, and a
Kafka outage. Every assertion is a count or an order."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import uuid
from collections import defaultdict
from typing import Any

import pytest
from sqlalchemy import func, select

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.store.status import ItemStatus

from ..support import (
    InboxItem,
    OutboxItem,
    create_numbered,
    delivered_at_least,
    make_registry,
    needs_kafka_control,
    order_violations,
    produce,
    read_topic,
    running_worker,
    service_env,
    spawn,
    wait_for,
)

pytestmark = pytest.mark.slow


async def count(container: Container, model: Any, status: ItemStatus | None = None) -> int:
    query = select(func.count()).select_from(model)
    if status is not None:
        query = query.where(model.status == int(status))
    async with container.session_factory()() as session:
        return int((await session.execute(query)).scalar_one())


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if process.poll() is None:
        process.send_signal(sig)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


async def create_sequences(container: Container, keys: int, per_key: int, writers: int = 8) -> None:
    """keys x per_key items, `{"seq": n}` in creation order per key, from concurrent writers."""
    outbox = container.outbox()

    async def writer(index: int) -> None:
        for seq in range(per_key):
            async with container.session_factory()() as session, session.begin():
                await outbox.create_batch(
                    session,
                    OutboxItem,
                    [
                        {"event_key": str(key), "event_name": "seq", "payload": {"seq": seq}}
                        for key in range(index, keys, writers)
                    ],
                )

    await asyncio.gather(*(writer(i) for i in range(writers)))


async def test_a_sigkilled_worker_loses_nothing_and_keys_stay_in_order(
    container: Container, env_topics: str
) -> None:
    keys, per_key = 50, 100
    env = service_env(container)
    workers = [spawn(["worker", "--concurrency", "2"], env) for _ in range(2)]
    try:
        await create_sequences(container, keys, per_key)
        total = keys * per_key
        await wait_for(lambda: delivered_at_least(container, total // 5), within=60)
        workers[0].send_signal(signal.SIGKILL)  # mid-stream: no chance to record its batch
        workers[0].wait(10)
        workers[0] = spawn(["worker"], env)
        await wait_for(lambda: delivered_at_least(container, total), within=120)
    finally:
        for worker in workers:
            stop(worker)
    received = read_topic(
        container.settings().kafka_bootstrap_servers, env_topics, expect=total, settle=2.0
    )
    per_key_seqs: dict[str, list[int]] = defaultdict(list)
    for message in received:
        per_key_seqs[message.key].append(json.loads(message.value)["seq"])
    distinct = len({m.headers["message-id"] for m in received})
    print(
        f"\nSIGKILL worker: created {total}, distinct on topic {distinct}, duplicates {len(received) - distinct}"
    )
    assert distinct == total
    assert order_violations(per_key_seqs) == 0


@needs_kafka_control
async def test_a_kafka_outage_delays_delivery_without_losing_items_or_retries(
    container: Container, env_topics: str
) -> None:
    registry = make_registry()
    async with running_worker(container, registry):
        await create_numbered(container, 0, 100)
        await wait_for(lambda: delivered_at_least(container, 100), within=30)
        await asyncio.to_thread(
            subprocess.run, shlex.split(os.environ["TEST_KAFKA_STOP_CMD"]), check=True
        )
        try:
            await create_numbered(container, 100, 300)
            await asyncio.sleep(5)
            during_outage = await count(container, OutboxItem, ItemStatus.DELIVERED)
        finally:
            await asyncio.to_thread(
                subprocess.run, shlex.split(os.environ["TEST_KAFKA_START_CMD"]), check=True
            )
        await wait_for(lambda: delivered_at_least(container, 400), within=120)
    assert during_outage == 100
    async with container.session_factory()() as session:
        errors = (await session.execute(select(func.sum(OutboxItem.errors_count)))).scalar_one()
    assert errors == 0
    received = read_topic(container.settings().kafka_bootstrap_servers, env_topics, expect=400)
    assert len({m.headers["message-id"] for m in received}) == 400


async def test_a_sigkilled_consumer_loses_nothing_and_stores_nothing_twice(
    container: Container, env_topics: str
) -> None:
    topic = f"{env_topics}-in"
    bootstrap = container.settings().kafka_bootstrap_servers
    ids = [str(uuid.uuid4()) for _ in range(4000)]
    messages = [(str(i % 40), b"{}", [("message-id", mid.encode())]) for i, mid in enumerate(ids)]
    messages += messages[::10]  # 10% sent twice
    env = service_env(container)
    consumers = [spawn(["consumer"], env) for _ in range(2)]
    try:
        await asyncio.to_thread(produce, bootstrap, topic, messages[: len(messages) // 2])
        await wait_for(lambda: _stored_at_least(container, 500), within=60)
        consumers[0].send_signal(signal.SIGKILL)
        consumers[0].wait(10)
        consumers[0] = spawn(["consumer"], env)
        await asyncio.to_thread(produce, bootstrap, topic, messages[len(messages) // 2 :])
        await wait_for(lambda: _stored_at_least(container, len(ids)), within=120)
        await asyncio.sleep(3)  # anything redelivered after the kill has arrived by now
    finally:
        for consumer in consumers:
            stop(consumer)
    async with container.session_factory()() as session:
        stored_ids = (await session.execute(select(InboxItem.uuid))).scalars().all()
    assert len(stored_ids) == len(ids)
    assert {str(i) for i in stored_ids} == set(ids)


async def _stored_at_least(container: Container, expected: int) -> bool:
    return await count(container, InboxItem) >= expected


async def test_sigterm_lets_the_worker_finish_its_batch_and_exit(
    container: Container, env_topics: str
) -> None:
    await create_sequences(container, keys=20, per_key=100)
    worker = spawn(["worker"], service_env(container))
    try:
        await wait_for(lambda: delivered_at_least(container, 1), within=60)
        worker.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(worker.wait, 40)
    finally:
        stop(worker)
    assert code == 0
    # Whatever it had claimed was recorded: every item is either delivered or untouched.
    async with container.session_factory()() as session:
        attempts = (await session.execute(select(func.sum(OutboxItem.errors_count)))).scalar_one()
    assert attempts == 0
    delivered = await count(container, OutboxItem, ItemStatus.DELIVERED)
    received = read_topic(
        container.settings().kafka_bootstrap_servers, env_topics, expect=delivered, settle=1.0
    )
    assert len({m.headers["message-id"] for m in received}) >= delivered
