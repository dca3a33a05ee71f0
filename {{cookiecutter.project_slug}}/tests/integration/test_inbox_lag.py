"""The inbox consumer's idle upkeep on a real Kafka: the lag it reports per partition (from
cached high watermarks, the broker asked only for partitions not fetched yet) and how often
it asks Kafka whether it answers (inbox/consumer.py)."""

from __future__ import annotations

import asyncio
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.inbox.consumer import InboxConsumer, partition_lag
from outbox_engine.store.pgconn import DriverConnections

from ..support import wait_for

# Messages written per partition.
WRITTEN = {0: 10, 1: 4, 2: 0}
COMMITTED_P0 = 3  # the offset committed on partition 0 (nothing on 1 and 2)
EXPECTED_LAG = {0: 7, 1: 4, 2: 0}


def _topic_with_messages(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3)])[topic].result(timeout=60)
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, count in WRITTEN.items():
        for i in range(count):
            producer.produce(topic, value=f"m{i}".encode(), partition=partition)
    assert producer.flush(30) == 0


def _consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )


def test_partition_lag_counts_from_the_committed_offset_or_the_start(
    container: Container, topic: str
) -> None:
    bootstrap = container.settings().kafka_bootstrap_servers
    _topic_with_messages(bootstrap, topic)
    group = f"lag-{uuid.uuid4().hex[:8]}"
    committer = _consumer(bootstrap, group)
    committer.commit(offsets=[TopicPartition(topic, 0, COMMITTED_P0)], asynchronous=False)
    committer.close()

    consumer = _consumer(bootstrap, group)
    try:
        partitions = [TopicPartition(topic, p) for p in WRITTEN]
        committed = consumer.committed(partitions, timeout=10)
        assert [tp.offset >= 0 for tp in committed] == [True, False, False]
        # Nothing fetched yet: no cached watermark, the broker is asked.
        assert consumer.get_watermark_offsets(partitions[1], cached=True)[1] < 0
        assert {tp.partition: partition_lag(consumer, tp) for tp in committed} == EXPECTED_LAG

        consumer.assign([TopicPartition(topic, p, 0) for p in WRITTEN])
        received = 0
        for _ in range(60):
            received += len(consumer.consume(100, 0.5))
            cached = [consumer.get_watermark_offsets(tp, cached=True)[1] for tp in partitions]
            if received == sum(WRITTEN.values()) and min(cached) >= 0:
                break
        assert received == 14
        assert cached == [10, 4, 0]  # what the fetch responses said
        # From the cache now; the committed offsets did not move by consuming.
        committed = consumer.committed(partitions, timeout=10)
        assert {tp.partition: partition_lag(consumer, tp) for tp in committed} == EXPECTED_LAG
    finally:
        consumer.close()


async def test_kafka_is_asked_every_kafka_check_interval_and_the_database_every_health_interval(
    container: Container,
) -> None:
    box = container.registry().select(None, kind="inbox")[0]
    consumer = InboxConsumer(
        box,
        container.engine(),
        container.settings().kafka_config(),
        f"lag-{uuid.uuid4().hex[:8]}",
        health_interval=0.2,
        kafka_check_interval=2.0,
    )
    calls = {"kafka": 0, "database": 0, "kafka in flight": 0}
    check_kafka, check_database = consumer._check_kafka, consumer.health.check_database

    async def counted_kafka(client: Consumer) -> None:
        # Counted when handed to the consumer's Kafka thread (it starts there once the
        # fetch in flight returns), in flight until it has run.
        calls["kafka"] += 1
        calls["kafka in flight"] += 1
        try:
            await check_kafka(client)
        finally:
            calls["kafka in flight"] -= 1

    async def counted_database(connections: DriverConnections) -> None:
        calls["database"] += 1
        await check_database(connections)

    async def settled() -> int:
        """The Kafka checks handed over so far, once none is in flight."""
        for _ in range(200):
            if not calls["kafka in flight"]:
                return calls["kafka"]
            await asyncio.sleep(0.05)
        raise AssertionError(f"a Kafka check took more than 10 s: {calls}")

    consumer._check_kafka = counted_kafka  # type: ignore[method-assign,assignment]
    consumer.health.check_database = counted_database  # type: ignore[method-assign]
    task = asyncio.create_task(consumer.run())
    try:
        await asyncio.wait_for(consumer.ready.wait(), 30)
        before = dict(calls)
        await asyncio.sleep(6.0)
        kafka, database = calls["kafka"] - before["kafka"], calls["database"] - before["database"]
        # 6 s: at most one Kafka check per 2 s (one at a time: a check queued behind the
        # consumer's fetch can take seconds) and the database every 0.2 s, not held up by it.
        assert 1 <= kafka <= 4, calls
        assert 12 <= database <= 30, calls
        # Kafka answers: with a long interval, no check is handed over once the due one
        # has been. The check already scheduled (due at most 2 s after the last one, later
        # when a database check holds up the loop on a loaded machine) still is, once.
        changed_at = calls["kafka"]
        consumer.kafka_check_interval = 3600.0

        async def due_check_handed_over() -> bool:
            return calls["kafka"] > changed_at

        await wait_for(due_check_handed_over, within=10)
        assert calls["kafka"] == changed_at + 1, calls
        quiet = await settled()
        await asyncio.sleep(2.0)
        assert calls["kafka"] == quiet, calls
        # A problem makes Kafka be asked every health_interval until it answers again.
        consumer.health.kafka_problem = "test: pretend Kafka went away"
        for _ in range(150):
            if consumer.health.kafka_problem is None:
                break
            await asyncio.sleep(0.1)
        assert consumer.health.kafka_problem is None
        assert calls["kafka"] == quiet + 1, calls
    finally:
        consumer.stop()
        await asyncio.wait_for(task, 60)
