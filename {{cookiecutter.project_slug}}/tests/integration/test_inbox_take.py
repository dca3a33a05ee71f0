"""The inbox consumer's fetch on a real Kafka (inbox/consumer.py `take`): a message is
returned as soon as it is there, with whatever else has already arrived, never more than
the batch size; with nothing there the poll waits its timeout and returns nothing.

Before `take`, the consumer asked librdkafka for a whole batch with a timeout
(`consume(500, 1.0)`), which waits until 500 messages are there or the second is over: at
a low rate every payment waited ~1 s before it was stored (the benchmark's mixed load,
payment to order_paid p50 ~950 ms at 50 payments/s)."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.inbox.consumer import take

TIMEOUT = 10.0  # a batch that waited for its size would take all of it


def _produce(producer: Producer, topic: str, first: int, count: int) -> None:
    for i in range(first, first + count):
        producer.produce(topic, value=f"m{i}".encode(), partition=0)
    assert producer.flush(30) == 0


def test_take_returns_what_has_arrived_at_once_and_no_more_than_the_batch_size(
    container: Container, topic: str
) -> None:
    bootstrap = container.settings().kafka_bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(timeout=60)
    producer = Producer({"bootstrap.servers": bootstrap})
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"take-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        # Nothing there: the poll waits its timeout and returns nothing.
        started = time.monotonic()
        assert take(consumer, 500, 1.0) == []
        assert 0.9 <= time.monotonic() - started < 5.0

        # 5 messages, a batch size of 500: all 5 at once, long before the timeout.
        _produce(producer, topic, 0, 5)
        started = time.monotonic()
        got = take(consumer, 500, TIMEOUT)
        assert [m.value() for m in got] == [f"m{i}".encode() for i in range(5)]
        assert time.monotonic() - started < TIMEOUT / 2

        # 10 more, a batch size of 3: the next 3 in order, then the next 3.
        _produce(producer, topic, 5, 10)
        started = time.monotonic()
        assert [m.value() for m in take(consumer, 3, TIMEOUT)] == [b"m5", b"m6", b"m7"]
        assert [m.value() for m in take(consumer, 3, TIMEOUT)] == [b"m8", b"m9", b"m10"]
        assert time.monotonic() - started < TIMEOUT / 2
    finally:
        consumer.close()
