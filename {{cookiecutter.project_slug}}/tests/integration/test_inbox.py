"""The inbox consumer on real Kafka and PostgreSQL: stored once, never dropped."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import select

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.config.registry import Box
from outbox_engine.inbox.consumer import INBOX_NAMESPACE, InboxConsumer

from ..support import INBOX_BOX, InboxItem, make_registry, produce, wait_for


@asynccontextmanager
async def running_consumer(
    container: Container, box: Box, kafka_config: dict[str, Any] | None = None, **options: Any
) -> AsyncIterator[InboxConsumer]:
    """A consumer of `box` in a group of its own, running until the block ends (`options`:
    InboxConsumer's intervals and timeouts; `kafka_config`: the settings' by default)."""
    consumer = InboxConsumer(
        box,
        container.engine(),
        kafka_config if kafka_config is not None else container.settings().kafka_config(),
        f"test-{uuid.uuid4().hex[:8]}",
        observer=container.observer(),
        **options,
    )
    task = asyncio.create_task(consumer.run())
    try:
        yield consumer
    finally:
        consumer.stop()
        await asyncio.wait_for(task, 30)


async def stored(container: Container) -> list[InboxItem]:
    async with container.session_factory()() as session:
        return list((await session.execute(select(InboxItem).order_by(InboxItem.id))).scalars())


async def _count(container: Container, expected: int) -> bool:
    return len(await stored(container)) == expected


async def test_messages_are_stored_once_with_their_ids_headers_and_source(
    container: Container, env_topics: str
) -> None:
    box = make_registry().get(INBOX_BOX)
    topic = box.inbox_config.topics[0]
    known = uuid.uuid4()
    produce(
        container.settings().kafka_bootstrap_servers,
        topic,
        [
            (
                "7",
                b'{"n": 1}',
                [("message-id", str(known).encode()), ("event-name", b"thing_happened")],
            ),
            (
                "7",
                b'{"n": 1}',
                [("message-id", str(known).encode()), ("event-name", b"thing_happened")],
            ),
            ("8", b'{"n": 2}', [("Idempotency-Key", b"abc-123")]),
            ("8", b'{"n": 2}', [("Idempotency-Key", b"abc-123")]),
            ("9", b'{"n": 3}', []),
        ],
    )
    async with running_consumer(container, box) as consumer:
        await wait_for(lambda: _count(container, 3), within=30)
        await asyncio.sleep(0.5)
    rows = sorted(await stored(container), key=lambda r: r.event_key)  # keys span partitions
    assert consumer.received == 5
    assert consumer.stored == 3
    assert [r.event_key for r in rows] == ["7", "8", "9"]
    assert rows[0].uuid == known
    assert rows[0].event_name == "thing_happened"
    assert rows[0].headers["message-id"] == str(known)
    assert rows[1].uuid == uuid.uuid5(INBOX_NAMESPACE, "idempotency-key:abc-123")
    assert rows[1].event_name == box.inbox_config.default_event_name
    last = rows[2]
    # Derived (no id header): from its position *and* its content (see test_inbox_ids.py),
    # never from the position alone, which a recreated topic hands out again.
    assert last.uuid.version == 5
    assert last.uuid != uuid.uuid5(
        INBOX_NAMESPACE, f"{topic}/{last.source_partition}/{last.source_offset}"
    )
    assert {r.source_topic for r in rows} == {topic}
    assert all(r.bucket == box.bucket_for(r.event_key) for r in rows)
    assert all(r.status == 0 for r in rows)


async def test_unprocessable_messages_are_stored_with_a_reason_and_do_not_block(
    container: Container, env_topics: str
) -> None:
    registry = make_registry(inbox={"max_message_bytes": 100})
    box = registry.get(INBOX_BOX)
    topic = box.inbox_config.topics[0]
    produce(
        container.settings().kafka_bootstrap_servers,
        topic,
        [
            ("1", b"x" * 500, []),
            ("1", None, []),
            (None, b"no key", []),
            ("1", b"fine", []),
        ],
    )
    async with running_consumer(container, box):
        await wait_for(lambda: _count(container, 4), within=30)
    rows = await stored(container)
    oversized = [
        r for r in rows if r.headers.get("rejected", "").startswith("message of 500 bytes")
    ]
    no_value = [r for r in rows if r.headers.get("rejected") == "message has no value"]
    no_key = [r for r in rows if r.payload == b"no key"]
    fine = [r for r in rows if r.payload == b"fine"]
    assert [len(oversized), len(no_value), len(no_key), len(fine)] == [1, 1, 1, 1]
    assert oversized[0].headers["rejected"] == "message of 500 bytes exceeds max_message_bytes 100"
    assert oversized[0].payload == b""
    assert no_key[0].event_key == f"{topic}/{no_key[0].source_partition}"
    assert "rejected" not in no_key[0].headers
    assert "rejected" not in fine[0].headers


async def test_a_restarted_consumer_does_not_store_twice(
    container: Container, env_topics: str
) -> None:
    box = make_registry().get(INBOX_BOX)
    topic = box.inbox_config.topics[0]
    bootstrap = container.settings().kafka_bootstrap_servers
    produce(
        bootstrap,
        topic,
        [(str(i), b"{}", [("message-id", str(uuid.uuid4()).encode())]) for i in range(50)],
    )
    group = f"test-{uuid.uuid4().hex[:8]}"
    for _ in range(2):  # the second run re-reads from committed offsets: nothing new to store
        consumer = InboxConsumer(
            box, container.engine(), container.settings().kafka_config(), group
        )
        task = asyncio.create_task(consumer.run())
        await wait_for(lambda: _count(container, 50), within=30)
        await asyncio.sleep(1.0)
        consumer.stop()
        await asyncio.wait_for(task, 30)
    assert len(await stored(container)) == 50
    assert consumer.stored == 0
