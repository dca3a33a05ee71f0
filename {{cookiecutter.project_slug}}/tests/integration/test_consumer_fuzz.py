"""The consumer fed garbage: random bytes, huge values, bad and duplicated headers, non-UTF-8
keys. Every message is stored (or fails in processing with a reason); the consumer runs on."""

from __future__ import annotations

import asyncio
import random

from sqlalchemy import func, select

from {{ cookiecutter.package_name }}.container import Container

from ..support import INBOX_BOX, InboxItem, KafkaMessage, make_registry, produce, wait_for
from .test_inbox import running_consumer


async def _stored(container: Container, expected: int) -> bool:
    async with container.session_factory()() as session:
        return (
            int((await session.execute(select(func.count()).select_from(InboxItem))).scalar_one())
            >= expected
        )


async def test_garbage_is_stored_with_reasons_and_nothing_stops_the_consumer(
    container: Container, env_topics: str
) -> None:
    rng = random.Random(7)
    registry = make_registry(inbox={"max_message_bytes": 4096})
    box = registry.get(INBOX_BOX)
    messages: list[KafkaMessage] = []
    for n in range(200):
        kind = n % 5
        key = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 20)))
        value = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300)))
        if kind == 0:
            messages.append((key.decode("latin-1"), value, []))
        elif kind == 1:
            messages.append((str(n), b"x" * 10_000, [("event-name", b"\xff\xfe")]))
        elif kind == 2:
            headers = [("message-id", b"not-a-uuid"), ("message-id", b"another"), ("hop", b"NaN")]
            messages.append((str(n), value, headers))
        elif kind == 3:
            messages.append((None, None, [("event-name", b"")]))
        else:
            messages.append((str(n), value, [("Idempotency-Key", bytes([n % 256]) * 3)]))
    produce(container.settings().kafka_bootstrap_servers, box.inbox_config.topics[0], messages)
    # Every message has its own id but the 40 that share the message-id "not-a-uuid" with
    # 40 different payloads: one is stored under that id, the other 39 as clash rows (stored,
    # rejected with the reason), so every message is stored.
    distinct = len(messages)
    async with running_consumer(container, box) as consumer:
        await wait_for(lambda: _stored(container, distinct), within=60)
        await asyncio.sleep(1)
    assert consumer.received == len(messages)
    assert consumer.stored == distinct
    assert consumer.clashes == 39
    async with container.session_factory()() as session:
        rows = list((await session.execute(select(InboxItem))).scalars())
    oversized = [r for r in rows if "exceeds max_message_bytes" in r.headers.get("rejected", "")]
    no_value = [r for r in rows if r.headers.get("rejected") == "message has no value"]
    assert len(oversized) == 40
    assert len(no_value) == 40
    assert all(r.event_key for r in rows)
    assert all(len(r.event_key) <= 255 for r in rows)
