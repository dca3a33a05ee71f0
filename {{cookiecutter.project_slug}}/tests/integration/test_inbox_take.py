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

from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.inbox.consumer import take

TIMEOUT = 10.0  # a batch that waited for its size would take all of it


def _produce(producer: Producer, topic: str, first: int, count: int) -> None:
    """`count` messages to partition 0, sent together: queued first, then one flush
    (which sends at once, ignoring linger), so the broker holds them as one batch."""
    for i in range(first, first + count):
        producer.produce(topic, value=f"m{i}".encode(), partition=0)
    assert producer.flush(30) == 0


def _values(messages: list[Message]) -> list[bytes | None]:
    return [m.value() for m in messages]


def test_take_returns_what_has_arrived_at_once_and_no_more_than_the_batch_size(
    container: Container, topic: str
) -> None:
    """What has "arrived" is what the client has fetched. The messages are in the topic
    before the consumer is assigned, so its first fetch brings all of them; producing
    while a fetch is in flight could split them over two fetches (seen once in CI: the
    first take returned m0 alone), which is still correct for the consumer but would
    make the counts here depend on timing."""
    bootstrap = container.settings().kafka_bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(timeout=60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000})
    _produce(producer, topic, 0, 15)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"take-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        started = time.monotonic()
        # A batch size of 3: the first 3 in order, then the next 3.
        assert _values(take(consumer, 3, TIMEOUT)) == [b"m0", b"m1", b"m2"]
        assert _values(take(consumer, 3, TIMEOUT)) == [b"m3", b"m4", b"m5"]
        # A batch size of 500 with 9 left: all 9 at once, long before the timeout.
        assert _values(take(consumer, 500, TIMEOUT)) == [f"m{i}".encode() for i in range(6, 15)]
        assert time.monotonic() - started < TIMEOUT / 2

        # Nothing there: the poll waits its timeout and returns nothing.
        started = time.monotonic()
        assert take(consumer, 500, 1.0) == []
        assert 0.9 <= time.monotonic() - started < 5.0

        # One more message after the empty poll: it comes as soon as it is there,
        # alone, not after the timeout a batch of 500 would wait for.
        _produce(producer, topic, 15, 1)
        started = time.monotonic()
        assert _values(take(consumer, 500, TIMEOUT)) == [b"m15"]
        assert time.monotonic() - started < TIMEOUT / 2
    finally:
        consumer.close()
