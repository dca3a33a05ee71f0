"""The inbox consumer's offset commits (inbox/commits.py) on a real Kafka.

confluent-kafka's `commit()` does not return while another thread of the consumer is in
`consume()`. The consumer fetches the next batch while it stores one, so a commit made on
the event loop held the loop until that fetch gave up (`poll_timeout`) whenever the input
ran dry: these tests store a message while the fetch waits on an empty topic and measure
the loop, and check that commits handed over in order land in order (on the consumer's
Kafka thread, behind the fetch). And a commit that did not hold, refused by the broker or
undone by an older one applied after it, is made again once the input runs dry: the
broker refuses for real (offset metadata over its 4,096-byte limit) and an older commit is
really applied after a newer one. And a batch whose partition a rebalance took while it
was stored does not commit that partition: two consumers of one group rebalance for real,
and the broker would apply the old owner's commit over the new owner's.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.inbox import consumer as consumer_module
from outbox_engine.inbox.commits import OffsetCommits
from outbox_engine.inbox.consumer import InboxConsumer
from outbox_engine.inbox.kafka_thread import ConsumerThread

from ..support import INBOX_BOX, make_registry, produce, uncommitted, wait_for
from .test_inbox import running_consumer, stored

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
        # The group's coordinator found first: a commit made while the client still looks
        # for it can be refused (_WAIT_COORD, seen in the Kafka outage scenario), and this
        # test is about the order, not about that (the consumer commits again: see below).
        await asyncio.to_thread(consumer.committed, [TopicPartition(topic, 0)], timeout=30)
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


# Over the broker's offset.metadata.max.bytes (4,096 by default): it refuses the commit.
TOO_LARGE = "m" * 5000


async def _behind(container: Container, consumer: InboxConsumer, topic: str) -> int:
    """Messages of `topic` after the consumer group's committed offsets, as the broker says."""
    bootstrap = container.settings().kafka_bootstrap_servers
    return await asyncio.to_thread(uncommitted, bootstrap, topic, consumer.group_id)


def _all_committed(
    container: Container, consumer: InboxConsumer, topic: str
) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await _behind(container, consumer, topic) == 0

    return check


@asynccontextmanager
async def _consuming_with(
    client: type[Consumer], container: Container, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[InboxConsumer, str]]:
    """A ready consumer of the test inbox box whose Kafka client is a `client`, and its topic."""
    monkeypatch.setattr(consumer_module, "Consumer", client)
    box = make_registry().get(INBOX_BOX)
    async with running_consumer(container, box, poll_timeout=0.3) as consumer:
        await asyncio.wait_for(consumer.ready.wait(), 60)
        yield consumer, box.inbox_config.topics[0]


async def _send_batches(
    container: Container, consumer: InboxConsumer, topic: str, batches: int
) -> None:
    """Two messages a batch, one key (one partition), each batch stored before the next."""
    for n in range(batches):
        produce(
            container.settings().kafka_bootstrap_servers,
            topic,
            [("k", b"{}", [("message-id", str(uuid.uuid4()).encode())]) for _ in range(2)],
        )

        async def stored_so_far(expected: int = 2 * n + 2) -> bool:
            return consumer.stored == expected

        await wait_for(stored_so_far, within=30)
        await consumer.flush()


async def test_commits_the_broker_refused_are_made_again_once_the_input_runs_dry(
    container: Container, env_topics: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusing = {"on": True}
    counts: Counter[str] = Counter()

    class Refused(Consumer):
        def commit(self, *args: Any, **kwargs: Any) -> Any:
            counts["commits"] += 1
            if refusing["on"]:
                counts["refused"] += 1
                kwargs["offsets"] = [
                    TopicPartition(tp.topic, tp.partition, tp.offset, metadata=TOO_LARGE)
                    for tp in kwargs["offsets"]
                ]
            return super().commit(*args, **kwargs)

    async with _consuming_with(Refused, container, monkeypatch) as (consumer, topic):
        await _send_batches(container, consumer, topic, 3)
        await asyncio.sleep(1.0)  # idle: commits sent again, refused again
        assert await _behind(container, consumer, topic) == 6
        assert counts["refused"] >= 4, counts  # three batches and at least one again
        assert consumer.writer.resent_commits >= 1
        refusing["on"] = False
        await wait_for(_all_committed(container, consumer, topic), within=15, interval=0.3)
        # Settled: no more commits while idle.
        resent = consumer.writer.resent_commits
        await asyncio.sleep(1.0)
        assert consumer.writer.resent_commits == resent
    assert len(await stored(container)) == 6
    assert counts["commits"] >= 3 + resent, counts


async def test_an_older_commit_applied_after_a_newer_one_is_undone_once_the_input_runs_dry(
    container: Container, env_topics: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As when the client retries a commit request after a lost connection and the retry
    reaches the broker after the commits sent meanwhile."""
    first: list[TopicPartition] = []
    counts: Counter[str] = Counter()

    class Late(Consumer):
        def commit(self, *args: Any, **kwargs: Any) -> Any:
            counts["commits"] += 1
            result = super().commit(*args, **kwargs)
            if not first:
                first.extend(kwargs["offsets"])
            elif not counts["late"]:
                counts["late"] += 1
                super().commit(offsets=first, asynchronous=True)  # the first batch's, again
            return result

    async with _consuming_with(Late, container, monkeypatch) as (consumer, topic):
        await _send_batches(container, consumer, topic, 2)
        all_committed = _all_committed(container, consumer, topic)

        async def undone_then_made_again() -> bool:
            # Not all_committed alone: the newest commit holds for a moment before the late
            # one (sent after it) reaches the broker and undoes it.
            return consumer.writer.resent_commits >= 1 and await all_committed()

        await wait_for(undone_then_made_again, within=15, interval=0.3)
        assert counts["late"] == 1
        assert consumer.writer.resent_commits == 1
        await asyncio.sleep(1.0)  # settled: nothing more is sent while idle
        assert consumer.writer.resent_commits == 1
        assert await all_committed()
        assert counts["commits"] >= 3, counts  # two batches and the newest again
    assert len(await stored(container)) == 4


def _group_member(kafka: dict[str, Any], group: str) -> Consumer:
    """A member of `group` with the inbox consumer's commit and assignment settings."""
    return Consumer(
        {
            **kafka,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "cooperative-sticky",
        }
    )


def _held(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


async def test_a_batch_stored_while_a_rebalance_took_its_partition_does_not_commit_it(
    container: Container, topic: str
) -> None:
    kafka: dict[str, Any] = {**container.settings().kafka_config()}
    admin = AdminClient(kafka)
    admin.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(timeout=60)
    producer = Producer(kafka)
    for partition in (0, 1):
        for n in range(20):
            producer.produce(topic, value=b"%d" % n, partition=partition)
    assert producer.flush(30) == 0
    group = f"test-rebalance-{uuid.uuid4().hex[:8]}"
    thread = ConsumerThread("old")  # every call on the old owner, as the consumer makes them
    commits = OffsetCommits(thread, lambda _error, _offsets: None)
    old = _group_member(kafka, group)
    new = _group_member(kafka, group)

    def subscribe_old() -> None:
        old.subscribe([topic], on_revoke=lambda _c, parts: commits.forget(parts))

    async def committed() -> dict[int, int]:
        found = await asyncio.to_thread(
            new.committed, [TopicPartition(topic, p) for p in (0, 1)], timeout=30
        )
        return {tp.partition: tp.offset for tp in found}

    try:
        await thread.call(subscribe_old)

        async def old_holds_both() -> bool:
            await thread.call(old.poll, 0.2)
            return await thread.call(_held, old) == {0, 1}

        await wait_for(old_holds_both, within=60, interval=0)
        commits.send(old, [TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 5)])
        await commits.drain()

        async def first_commit_holds() -> bool:
            await thread.call(old.poll, 0.1)  # serves the answer
            return await committed() == {0: 5, 1: 5}

        await wait_for(first_commit_holds, within=30, interval=0)

        # A second member joins: the cooperative rebalance moves one partition to it.
        await asyncio.to_thread(new.subscribe, [topic])

        async def one_each() -> bool:
            await asyncio.gather(thread.call(old.poll, 0.2), asyncio.to_thread(new.poll, 0.2))
            held_old = await thread.call(_held, old)
            return len(held_old) == 1 and held_old | await asyncio.to_thread(_held, new) == {
                0,
                1,
            }

        await wait_for(one_each, within=60, interval=0)
        (kept,) = await thread.call(_held, old)
        moved = 1 - kept
        # The new owner stores and commits past where the old one stopped ...
        await asyncio.to_thread(
            new.commit, offsets=[TopicPartition(topic, moved, 15)], asynchronous=False
        )
        # ... and then the old owner's batch, stored while the rebalance took `moved`,
        # has its offsets handed over.
        commits.send(old, [TopicPartition(topic, moved, 10), TopicPartition(topic, kept, 8)])
        await commits.drain()

        async def kept_committed() -> bool:
            await thread.call(old.poll, 0.1)
            return (await committed())[kept] == 8

        await wait_for(kept_committed, within=30, interval=0)
        await asyncio.sleep(1.0)  # a commit of `moved`, had one gone out, lands meanwhile
        assert await committed() == {moved: 15, kept: 8}
        assert (commits.sent, commits.withheld) == (2, 1)
    finally:
        await thread.call(old.close)
        thread.close()
        await asyncio.to_thread(new.close)
