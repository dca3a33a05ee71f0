"""The relay's batch path to Kafka: one future per batch, an outcome per message, in order."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from datetime import UTC, datetime

import pytest
from confluent_kafka.admin import AdminClient

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.relay.readiness import checked_topic
from outbox_engine.transports.base import ItemRecord, PermanentFailure, TransportUnavailable
from outbox_engine.transports.builtin import KafkaTransport
from outbox_engine.transports.kafka import KafkaProducer
from outbox_engine.transports.kafka_logs import LIBRDKAFKA_LOGGER, REPEATS

from ..support import OUTBOX_BOX, RecordingTransport, make_registry, read_topic, transport


def _item(n: int, key: str, created_at: datetime) -> ItemRecord:
    return ItemRecord(
        id=n,
        uuid=uuid.uuid4(),
        box="test_box",
        event_name="thing_happened",
        event_key=key,
        bucket=0,
        headers={"hop": 0, "correlation-id": "corr-1", "tenant": "t-7"},
        errors_count=0,
        created_at=created_at,
    )


async def test_a_batch_resolves_once_with_an_outcome_per_message(
    container: Container, topic: str
) -> None:
    # A producer of its own with a small message limit, so that two messages are refused.
    producer = KafkaProducer({**container.settings().kafka_config(), "message.max.bytes": 20_000})
    producer.start()
    try:
        transport = KafkaTransport(topic=topic)
        await transport.setup(dataclasses.replace(container.resources(), producer=producer))
        now = datetime.now(UTC)
        items = [
            (_item(n, f"k{n % 7}", now), (b"x" * 30_000 if n in (40, 41) else b"v%d" % n))
            for n in range(300)
        ]
        outcomes = await transport.enqueue_many(items)
        assert len(outcomes) == 300
        refused = [n for n, o in enumerate(outcomes) if isinstance(o, PermanentFailure)]
        assert refused == [40, 41]
        assert sum(o is None for o in outcomes) == 298
        assert await transport.enqueue_many([]) == []
    finally:
        await producer.close()

    received = read_topic(container.settings().kafka_bootstrap_servers, topic, 298)
    assert len(received) == 298
    by_value = {r.value: r for r in received}
    first = by_value[b"v0"]
    assert first.key == "k0"
    assert first.headers["message-id"] == str(items[0][0].uuid)
    assert first.headers["event-name"] == "thing_happened"
    assert first.headers["created-at"] == now.isoformat()
    assert first.headers["correlation-id"] == "corr-1"
    assert (first.headers["hop"], first.headers["tenant"]) == ("0", "t-7")
    # Per key, the order of hand-over (each key stays in one partition).
    for key in {f"k{n}" for n in range(7)}:
        values = [
            int(r.value[1:]) for r in sorted(received, key=lambda r: r.offset) if r.key == key
        ]
        assert values == sorted(values)
        assert len(values) >= 40


async def test_librdkafka_lines_go_through_python_logging_summarised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A producer pointed at a closed port: librdkafka's connection errors (several a second)
    arrive as records of the service's logger, not as raw `%3|...` lines on stderr, and the
    repeats come back as one summary with their count."""
    caplog.set_level(logging.INFO)
    REPEATS.flush()
    caplog.clear()
    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "message.timeout.ms": 3000})
    producer.start()
    try:
        await asyncio.sleep(4)
    finally:
        await producer.close(wait_seconds=1)  # flushes the pending summaries
    raw = [r for r in caplog.records if r.name == LIBRDKAFKA_LOGGER]
    assert 1 <= len(raw) <= 3, [r.getMessage() for r in raw]
    assert "Connection refused" in raw[0].getMessage()
    summaries = [r for r in raw if "repeated" in r.__dict__]
    assert summaries, "the repeats should be summarised"
    assert summaries[0].__dict__["repeated"] >= 5
    warnings = [r for r in caplog.records if r.name == "outbox_engine.transports.kafka"]
    assert len(warnings) <= 6, [r.getMessage() for r in warnings]


async def test_the_kafka_check_asks_for_one_topic(container: Container, topic: str) -> None:
    """The worker's readiness check names the first Kafka transport's topic (the whole
    cluster's metadata costs CPU in proportion to its topics, every few seconds); a topic
    that does not exist yet still counts as Kafka answering (where the cluster creates
    topics on first use, asking creates it, as the first delivery would). A cluster that
    does not answer is reported within the check's time limit."""
    registry = make_registry(
        outbox={
            "transports": [
                transport(RecordingTransport, name="first"),
                transport(KafkaTransport, topic=topic),
                transport(KafkaTransport, topic=f"{topic}-second"),
            ]
        }
    )
    boxes = [registry.get(name) for name in registry.names()]
    assert checked_topic(boxes) == topic
    # Inbox boxes and other transports do not count.
    no_kafka = make_registry(outbox={"transports": [transport(RecordingTransport, name="x")]})
    assert checked_topic([no_kafka.get(OUTBOX_BOX)]) is None
    assert checked_topic([no_kafka.get(name) for name in no_kafka.names()]) is None

    config = container.settings().kafka_config()
    producer = KafkaProducer(config)
    producer.start()
    try:
        admin = AdminClient({"bootstrap.servers": config["bootstrap.servers"]})
        assert topic not in admin.list_topics(timeout=10).topics
        await producer.check(wait_seconds=5.0, topic=topic)
        await producer.check(wait_seconds=5.0, topic=None)
    finally:
        await producer.close()

    closed = KafkaProducer({**config, "bootstrap.servers": "127.0.0.1:9"})
    closed.start()
    try:
        started = asyncio.get_running_loop().time()
        with pytest.raises(TransportUnavailable):
            await closed.check(wait_seconds=1.0, topic=topic)
        assert asyncio.get_running_loop().time() - started < 5.0
    finally:
        await closed.close(wait_seconds=1.0)
