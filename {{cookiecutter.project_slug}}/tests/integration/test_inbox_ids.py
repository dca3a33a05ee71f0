"""Inbox message ids that cannot collide (real Kafka and PostgreSQL).

A message's id either comes from its producer (`message-id`, `Idempotency-Key`) or is derived
from where it is *and* what it is. The same message read again keeps its id (and is stored
once); a different message never silently takes the place of a stored one: a recreated
topic's offset 0 gets a new id, and an id that comes back with a different payload is stored
as a rejected row of its own that fails with the reason.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.inbox.clash import clash_id
from outbox_engine.inbox.consumer import REJECTED_HEADER
from outbox_engine.store.status import ItemStatus

from ..support import (
    INBOX_BOX,
    RecordingHandler,
    make_registry,
    produce,
    running_worker,
    transport,
    wait_for,
)
from .test_inbox import running_consumer, stored


async def _stored_count(container: Container, expected: int) -> bool:
    return len(await stored(container)) == expected


def _recreate(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics([topic], operation_timeout=30).values():
        future.result(timeout=60)
    for _ in range(100):  # deletion completes in the background
        try:
            for future in admin.create_topics(
                [NewTopic(topic, num_partitions=1, replication_factor=1)]
            ).values():
                future.result(timeout=60)
            return
        except KafkaException as exc:  # the old topic is still being deleted
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
        time.sleep(0.2)
    raise AssertionError(f"topic {topic} could not be recreated")


async def test_a_recreated_topic_does_not_reuse_the_ids_of_its_offsets(
    container: Container, env_topics: str
) -> None:
    bootstrap = container.settings().kafka_bootstrap_servers
    topic = f"{env_topics}-in"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(
        timeout=60
    )
    box = make_registry().get(INBOX_BOX)
    produce(bootstrap, topic, [("1", b'{"payment": "first"}', [])])
    async with running_consumer(container, box):
        await wait_for(lambda: _stored_count(container, 1), within=30)
    await asyncio.to_thread(_recreate, bootstrap, topic)
    # A new message at the same offset 0 of the recreated topic, without an id header.
    produce(bootstrap, topic, [("1", b'{"payment": "second"}', [])])
    async with running_consumer(container, box) as consumer:
        await wait_for(lambda: _stored_count(container, 2), within=30)
        await asyncio.sleep(0.5)
    rows = await stored(container)
    assert [(r.source_offset, r.payload) for r in rows] == [
        (0, b'{"payment": "first"}'),
        (0, b'{"payment": "second"}'),
    ]
    assert rows[0].uuid != rows[1].uuid
    assert consumer.stored == 1


async def test_a_replay_of_the_same_messages_stores_nothing_new(
    container: Container, env_topics: str
) -> None:
    bootstrap = container.settings().kafka_bootstrap_servers
    topic = f"{env_topics}-in"
    box = make_registry().get(INBOX_BOX)
    produce(bootstrap, topic, [(str(n % 3), b'{"n": %d}' % n, []) for n in range(20)])
    async with running_consumer(container, box):
        await wait_for(lambda: _stored_count(container, 20), within=30)
    first = {r.uuid for r in await stored(container)}
    # A second consumer group reads the topic from the start: a replay of all 20.
    async with running_consumer(container, box) as replay:
        await wait_for(lambda: _replayed(replay, 20), within=30)
    assert replay.stored == 0
    assert replay.clashes == 0
    assert {r.uuid for r in await stored(container)} == first


async def _replayed(consumer: object, expected: int) -> bool:
    return getattr(consumer, "received", 0) >= expected


async def test_an_id_that_comes_back_with_another_payload_is_stored_as_failed_and_logged(
    container: Container, env_topics: str, caplog: pytest.LogCaptureFixture
) -> None:
    bootstrap = container.settings().kafka_bootstrap_servers
    topic = f"{env_topics}-in"
    registry = make_registry(inbox={"transports": [transport(RecordingHandler, name="h")]})
    box = registry.get(INBOX_BOX)
    reused = str(uuid.uuid4()).encode()
    headers = [("message-id", reused), ("event-name", b"payment_received")]
    produce(bootstrap, topic, [("5", b'{"order_id": 5, "amount": "10.00"}', headers)])
    caplog.set_level(logging.WARNING)
    async with running_consumer(container, box) as consumer:
        await wait_for(lambda: _stored_count(container, 1), within=30)
        # The same id again: once with the same payload (a redelivery: absorbed), once with a
        # different one (a clash: kept, as a rejected row of its own).
        produce(
            bootstrap,
            topic,
            [
                ("5", b'{"order_id": 5, "amount": "10.00"}', headers),
                ("5", b'{"order_id": 5, "amount": "99.00"}', headers),
            ],
        )
        await wait_for(lambda: _stored_count(container, 2), within=30)
        await asyncio.sleep(0.5)
    assert consumer.received == 3
    assert consumer.stored == 2
    assert consumer.clashes == 1
    rows = await stored(container)
    original, clash = rows
    assert original.uuid == uuid.UUID(reused.decode())
    assert clash.uuid == clash_id(
        original.uuid,
        clash.source_topic or "",
        clash.source_partition or 0,
        clash.source_offset or 0,
    )
    assert clash.payload == b'{"order_id": 5, "amount": "99.00"}'
    assert clash.headers["clashed-message-id"] == reused.decode()
    reason = clash.headers[REJECTED_HEADER]
    assert f"message id {reused.decode()} is already stored with a different payload" in reason
    assert "99.00" not in reason
    assert sum(reason in r.getMessage() for r in caplog.records) == 1

    # Processing: the original is handled, the clash fails at once with the reason.
    async with running_worker(container, registry):
        await wait_for(
            lambda: _statuses(container, [ItemStatus.DELIVERED, ItemStatus.FAILED]), within=30
        )
    rows = await stored(container)
    assert rows[1].errors_count == 1
    assert rows[1].last_error == f"rejected by the consumer: {reason}"

    # Read again by another group: neither the original nor the clash is stored twice.
    async with running_consumer(container, box) as replay:
        await wait_for(lambda: _replayed(replay, 3), within=30)
    assert replay.stored == 0
    assert len(await stored(container)) == 2


async def _statuses(container: Container, expected: list[ItemStatus]) -> bool:
    return [r.status for r in await stored(container)] == [int(s) for s in expected]


async def test_a_header_with_a_null_value_is_stored_as_absent(
    container: Container, env_topics: str
) -> None:
    """The Debezium relay sends a null-valued header where the worker sends none (an item
    without causation-id or trace context): the inbox stores both messages alike."""
    bootstrap = container.settings().kafka_bootstrap_servers
    topic = f"{env_topics}-in"
    box = make_registry().get(INBOX_BOX)
    ids = [uuid.uuid4() for _ in range(3)]
    body = b'{"order_id": 7, "amount": "10.00"}'
    common = [("event-name", b"payment_received"), ("correlation-id", b"c-7")]
    produce(
        bootstrap,
        topic,
        [
            # As the worker sends it: no causation-id at all.
            ("7", body, [("message-id", str(ids[0]).encode()), *common]),
            # As Debezium sends it: the absent headers with null values.
            (
                "7",
                body,
                [
                    ("message-id", str(ids[1]).encode()),
                    *common,
                    ("traceparent", None),
                    ("causation-id", None),
                ],
            ),
            # A null message-id is no id: the id is derived, as for a message without one.
            ("7", body, [("message-id", None), *common]),
        ],
    )
    async with running_consumer(container, box):
        await wait_for(lambda: _stored_count(container, 3), within=30)
    rows = {row.uuid: row for row in await stored(container)}
    assert set(rows) >= {ids[0], ids[1]}
    # Alike but for their own ids and the trace context the consumer gives each message
    # that arrives without one.
    own = {"message-id", "traceparent"}
    worker_like = {k: v for k, v in rows[ids[0]].headers.items() if k not in own}
    debezium_like = {k: v for k, v in rows[ids[1]].headers.items() if k not in own}
    assert (
        worker_like == debezium_like == {"event-name": "payment_received", "correlation-id": "c-7"}
    )
    assert rows[ids[1]].headers["message-id"] == str(ids[1])
    assert rows[ids[1]].headers.keys() == rows[ids[0]].headers.keys()
    (derived,) = set(rows) - {ids[0], ids[1]}
    assert rows[derived].status != ItemStatus.FAILED
    assert "message-id" not in rows[derived].headers
