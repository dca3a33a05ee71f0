"""The inbox consumer's offset commits (inbox/commits.py) on a real Kafka.

confluent-kafka's `commit()` does not return while another thread of the consumer is in
`consume()`. The consumer fetches the next batch while it stores one, so a commit made on
the event loop held the loop until that fetch gave up (`poll_timeout`) whenever the input
ran dry: these tests store a message while the fetch waits on an empty topic and measure
the loop, and check that commits handed over in order land in order (on the consumer's
Kafka thread, behind the fetch).
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.inbox.commits import OffsetCommits
from outbox_engine.inbox.consumer import InboxConsumer
from outbox_engine.inbox.kafka_thread import ConsumerThread

from ..support import INBOX_BOX, make_registry, wait_for
from .test_inbox import stored

POLL_TIMEOUT = 3.0


async def _loop_gaps(stop: asyncio.Event, gaps: list[float]) -> None:
    """The longest time the event loop did not run this coroutine, every 20 ms."""
    while not stop.is_set():
        before = time.monotonic()
        await asyncio.sleep(0.02)
        gaps.append(time.monotonic() - before - 0.02)


async def test_storing_a_batch_while_the_fetch_waits_does_not_hold_the_event_loop(
    container: Container, env_topics: str
) -> None:
    box = make_registry().get(INBOX_BOX)
    topic = box.inbox_config.topics[0]
    producer = Producer(container.settings().kafka_config())

    def send(n: int) -> None:
        producer.produce(topic, value=b'{"n": %d}' % n, key=b"k", partition=0)
        assert producer.flush(30) == 0

    send(0)  # creates the topic
    consumer = InboxConsumer(
        box,
        container.engine(),
        container.settings().kafka_config(),
        f"test-{uuid.uuid4().hex[:8]}",
        poll_timeout=POLL_TIMEOUT,
        observer=container.observer(),
    )
    task = asyncio.create_task(consumer.run())
    stop, gaps = asyncio.Event(), list[float]()
    try:
        await asyncio.wait_for(consumer.ready.wait(), 60)
        ticker = asyncio.create_task(_loop_gaps(stop, gaps))
        for n in range(3):
            if n:
                send(n)
            await wait_for(functools.partial(_stored_count, container, n + 1), within=30)
            # The next fetch waits on an empty topic now; the write's commit comes meanwhile.
            await asyncio.sleep(POLL_TIMEOUT + 0.5)
        await consumer.flush()
        stop.set()
        await ticker
    finally:
        stop.set()
        consumer.stop()
        await asyncio.wait_for(task, 30)
    worst = max(gaps)
    assert worst < 0.5, f"the event loop was held {worst:.2f} s"
    reader = Consumer({**container.settings().kafka_config(), "group.id": consumer.group_id})
    try:
        committed = reader.committed([TopicPartition(topic, 0)], timeout=30)
    finally:
        reader.close()
    assert committed[0].offset >= 3


async def _stored_count(container: Container, expected: int) -> bool:
    return len(await stored(container)) >= expected


async def test_commits_are_sent_in_the_order_given(container: Container, topic: str) -> None:
    kafka = container.settings().kafka_config()
    producer = Producer(kafka)
    for n in range(60):
        producer.produce(topic, value=b"%d" % n, partition=0)
    assert producer.flush(30) == 0
    group = f"test-commits-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({**kafka, "group.id": group, "enable.auto.commit": False})
    errors: list[object] = []
    thread = ConsumerThread("test")
    commits = OffsetCommits(thread, lambda error, _offsets: errors.append(error))
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        assert len(await asyncio.to_thread(consumer.consume, 10, 10.0)) > 0
        for offset in range(1, 51):
            commits.send(consumer, [TopicPartition(topic, 0, offset)])
        await commits.drain()
        assert commits.sent == 50
        assert errors == []
        seen: list[int] = []

        async def last_is_committed() -> bool:
            # Asynchronous commits: the broker may apply the last one a moment after drain.
            found = await asyncio.to_thread(
                consumer.committed, [TopicPartition(topic, 0)], timeout=30
            )
            seen.append(found[0].offset)
            return found[0].offset == 50

        # Sent out of order, an earlier offset would stay committed after the last one.
        await wait_for(last_is_committed, within=15, interval=0.2)
        assert max(seen) == 50
    finally:
        thread.close()
        consumer.close()
