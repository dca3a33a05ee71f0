"""A producer whose client is stuck on partitions the cluster can write: replaced, losing
nothing (transports/kafka_stuck.py, KafkaProducer.recover and replace)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import defaultdict
from collections.abc import Callable

import pytest

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.relay.pacing import Pacer
from outbox_engine.relay.readiness import WorkerHealth
from outbox_engine.transports.base import TransportUnavailable
from outbox_engine.transports.builtin import KafkaTransport
from outbox_engine.transports.kafka import KafkaProducer
from outbox_engine.transports.kafka_stuck import StuckPartitions

from ..support import Clock, make_registry, read_topic, transport


def _poll_threads() -> int:
    return sum(t.name == "kafka-producer" and t.is_alive() for t in threading.enumerate())


async def _until(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


def _batch(
    topic: str, first: int, count: int
) -> list[tuple[str, bytes, bytes, list[tuple[str, bytes]]]]:
    return [(topic, b"%d" % n, b"key-%d" % (n % 40), []) for n in range(first, first + count)]


async def test_a_replaced_client_serves_its_reports_and_the_new_one_keeps_key_order(
    container: Container, topic: str
) -> None:
    config = container.settings().kafka_config()
    before = _poll_threads()
    producer = KafkaProducer(config)
    producer.start()
    try:
        await producer.check(wait_seconds=10.0, topic=topic)
        first = producer.produce_batch(_batch(topic, 0, 3000))
        # Replaced while the batch is in the old client: its reports still come.
        producer.replace("a test")
        assert producer.replacements == 1
        assert _poll_threads() == before + 2
        assert await asyncio.wait_for(first, 30) == [None] * 3000
        # Then, as the relay does, a key's next messages only after its last were reported.
        second = await asyncio.wait_for(producer.produce_batch(_batch(topic, 3000, 3000)), 30)
        assert second == [None] * 3000
        await asyncio.wait_for(producer.produce(topic, b"6000", b"key-0", []), 30)
        await _until(lambda: _poll_threads() == before + 1)  # the old client flushed, closed
    finally:
        await producer.close()
    assert _poll_threads() == before

    received = await asyncio.to_thread(read_topic, config["bootstrap.servers"], topic, 6001)
    assert sorted(int(m.value) for m in received) == list(range(6001))
    by_key: dict[str, list[int]] = defaultdict(list)
    for message in sorted(received, key=lambda m: (m.partition, m.offset)):
        by_key[message.key].append(int(message.value))
    assert len(by_key) == 40
    assert all(values == sorted(values) for values in by_key.values())


async def test_real_timeouts_on_led_partitions_replace_the_client_once(
    container: Container, topic: str
) -> None:
    # A message a request, one request at a time, and 2 ms to deliver: most of 20,000
    # messages time out, on partitions the client knows and the cluster leads. What a stuck
    # client reports, from librdkafka itself. The streak's minute is a clock moved by the test.
    config = {
        **container.settings().kafka_config(),
        "message.timeout.ms": 2,
        "batch.num.messages": 1,
        "max.in.flight.requests.per.connection": 1,
    }
    clock = Clock()
    producer = KafkaProducer(config, replace_interval=300.0)
    producer.stuck = StuckPartitions(after_seconds=60.0, min_timeouts=1, clock=clock)
    producer.start()
    try:
        await producer.check(wait_seconds=10.0, topic=topic)
        assert await producer.recover() is None  # nothing timed out yet
        outcomes = await asyncio.wait_for(producer.produce_batch(_batch(topic, 0, 20_000)), 30)
        failed = [o for o in outcomes if o is not None]
        assert failed, "no message timed out"
        assert all("_MSG_TIMED_OUT" in str(o) for o in failed)
        watched = producer.stuck.watched()
        assert watched
        assert {t for t, _ in watched} == {topic}
        assert {p for _, p in watched} <= {0, 1, 2}
        assert producer.stuck.stuck() == []  # not for a minute yet
        clock.now += 60.0
        assert producer.stuck.stuck() == watched
        reason = await producer.recover()
        assert reason is not None
        named = ", ".join(f"{t}[{p}]" for t, p in watched)
        assert reason.startswith(f"messages to {named} timed out for 60 s or more"), reason
        assert producer.replacements == 1
        assert producer.stuck.watched() == []  # the new client starts with no history
        # Stuck again at once: not replaced again within replace_interval.
        producer.stuck.timed_out(topic, 0)
        clock.now += 60.0
        assert producer.stuck.stuck() == [(topic, 0)]
        assert await producer.recover() is None
        assert producer.replacements == 1
    finally:
        await producer.close(wait_seconds=5.0)


async def test_no_replacement_for_partitions_without_a_leader_or_a_cluster(
    container: Container, topic: str
) -> None:
    config = container.settings().kafka_config()
    producer = KafkaProducer(config, stuck_after_seconds=0.1)
    producer.start()
    try:
        await producer.check(wait_seconds=10.0, topic=topic)  # created: 3 partitions
        unled = sorted([(topic, 7), (topic, 9), (f"{topic}-never-created", 0)])
        for round_ in range(2):
            if round_:
                await asyncio.sleep(0.12)
            for name, partition in unled:  # no such partitions: no leader listed
                producer.stuck.timed_out(name, partition)
        assert producer.stuck.stuck() == unled
        assert await producer.recover() is None
        assert producer.replacements == 0
        # A message delivered to a watched partition ends its streak (the real report path).
        producer.stuck.timed_out(topic, 0)
        producer.stuck.timed_out(topic, 1)
        producer.stuck.timed_out(topic, 2)
        outcomes = await asyncio.wait_for(producer.produce_batch(_batch(topic, 0, 400)), 30)
        assert outcomes == [None] * 400
        assert producer.stuck.watched() == unled  # 0, 1 and 2 were written to
    finally:
        await producer.close()

    unreachable = KafkaProducer({**config, "bootstrap.servers": "127.0.0.1:9"})
    unreachable.stuck = StuckPartitions(after_seconds=0.1, min_timeouts=1)
    unreachable.start()
    try:
        unreachable.stuck.timed_out(topic, 0)
        await asyncio.sleep(0.12)
        unreachable.stuck.timed_out(topic, 0)
        assert unreachable.stuck.stuck() == [(topic, 0)]
        assert await unreachable.recover(wait_seconds=1.0) is None  # no metadata: an outage
        assert unreachable.replacements == 0
    finally:
        await unreachable.close(wait_seconds=1.0)


async def test_the_workers_kafka_check_replaces_a_stuck_client_and_says_why(
    container: Container, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    """WorkerHealth.kafka_loop: after a check that passed, a stuck client is replaced (one
    warning naming the partition) and the lanes backing off are woken (`recovered`); a
    check that fails forgets the streaks (an outage)."""
    registry = make_registry(outbox={"transports": [transport(KafkaTransport, topic=topic)]})
    boxes = [registry.get(name) for name in registry.names()]
    config = container.settings().kafka_config()
    clock = Clock()
    producer = KafkaProducer(config)
    producer.stuck = StuckPartitions(after_seconds=60.0, clock=clock)
    health = WorkerHealth(boxes, 1, producer, "postgresql://x@db/app", lambda: 0, 0.05)
    pacer = Pacer()
    caplog.set_level(logging.WARNING, logger="outbox_engine.transports.kafka")
    producer.start()
    loop = asyncio.create_task(health.kafka_loop(pacer))
    try:
        await _until(lambda: health.kafka_checked.is_set())
        assert health.kafka_problem is None
        assert health.recovered.fired == 1  # the first answer ends any outage back-off
        producer.stuck.timed_out(topic, 2)
        clock.now += 30.0
        producer.stuck.timed_out(topic, 2)
        clock.now += 29.0
        await asyncio.sleep(0.3)  # checks ran: 59 s since the first timeout, not stuck
        assert producer.replacements == 0
        assert health.recovered.fired == 1  # checks that pass change nothing
        clock.now += 1.0
        await _until(lambda: producer.replacements == 1)
        assert health.recovered.fired == 2  # the lanes try the new client at once
        assert producer.stuck.watched() == []
        said = [r.getMessage() for r in caplog.records if "replaced the producer" in r.getMessage()]
        assert len(said) == 1, said
        assert said[0].startswith(f"kafka producer: messages to {topic}[2] timed out for 60 s")
        await asyncio.wait_for(producer.produce(topic, b"after", b"k", []), 30)  # delivered
    finally:
        pacer.stop()
        await loop
        await producer.close()

    unreachable = KafkaProducer({**config, "bootstrap.servers": "127.0.0.1:9"})
    unreachable.stuck = StuckPartitions(after_seconds=60.0, clock=clock)
    unreachable.start()
    try:
        unreachable.stuck.timed_out(topic, 0)
        with pytest.raises(TransportUnavailable):
            await unreachable.check(wait_seconds=0.5, topic=topic)
        assert unreachable.stuck.watched() == []
    finally:
        await unreachable.close(wait_seconds=1.0)


async def test_close_purges_a_replaced_client_that_cannot_flush(container: Container) -> None:
    """Shutdown does not wait out a replaced client's message timeout: after `wait_seconds`
    what it holds is purged, and its batch resolves as unavailable (no retry consumed)."""
    config = {
        **container.settings().kafka_config(),
        "bootstrap.servers": "127.0.0.1:9",
        "message.timeout.ms": 120_000,
    }
    producer = KafkaProducer(config)
    producer.start()
    batch = producer.produce_batch(_batch("never-written", 0, 50))
    producer.replace("a test")
    loop = asyncio.get_running_loop()
    started = loop.time()
    await producer.close(wait_seconds=1.0)
    assert loop.time() - started < 10.0
    outcomes = await asyncio.wait_for(batch, 5)
    assert len(outcomes) == 50
    assert all(isinstance(o, TransportUnavailable) for o in outcomes), outcomes[:3]
    assert all("_PURGE" in str(o) for o in outcomes), outcomes[:3]


async def test_a_client_that_cannot_reach_a_cluster_a_new_client_reaches_is_replaced(
    container: Container, topic: str
) -> None:
    """Case (b): the checks fail; after `stuck_after_seconds` a client made for the purpose
    asks (at most once per `stuck_after_seconds`); replaced only when it gets an answer."""
    real = container.settings().kafka_config()["bootstrap.servers"]
    producer = KafkaProducer(
        {**container.settings().kafka_config(), "bootstrap.servers": "127.0.0.1:9"},
        stuck_after_seconds=0.5,
    )
    producer.start()
    loop = asyncio.get_running_loop()
    try:
        with pytest.raises(TransportUnavailable):
            await producer.check(wait_seconds=0.5, topic=topic)
        assert await producer.recover(wait_seconds=0.5) is None  # failing for < 0.5 s
        await asyncio.sleep(0.5)
        started = loop.time()
        assert await producer.recover(wait_seconds=0.5) is None  # a new client: no answer
        assert loop.time() - started >= 0.4  # it asked (and waited)
        started = loop.time()
        assert await producer.recover(wait_seconds=0.5) is None
        assert loop.time() - started < 0.2  # not again within 0.5 s
        assert producer.replacements == 0
        # The cluster reachable for a client made now, not for this one: a new client's
        # settings point at it (the client made before stands for a stuck one).
        producer._config["bootstrap.servers"] = real
        await asyncio.sleep(0.5)
        reason = await producer.recover(wait_seconds=5.0)
        assert reason is not None
        assert reason.startswith("its metadata requests failed for "), reason
        assert reason.endswith(" s while a new client's was answered"), reason
        assert producer.replacements == 1
        await producer.check(wait_seconds=5.0, topic=topic)  # through the new client
        await asyncio.wait_for(producer.produce(topic, b"after", b"k", []), 30)  # delivered
        assert await producer.recover(wait_seconds=0.5) is None
    finally:
        await producer.close(wait_seconds=2.0)
