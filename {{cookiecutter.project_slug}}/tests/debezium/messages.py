"""Reading a test topic back exactly as a consumer gets it: key and value bytes, and the
headers as the ordered list of (name, value) pairs with null values kept (tests/support's
`read_topic` turns headers into a dict of strings, which hides both order and nulls: the
differences between the two relays the header test is about)."""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from ..support import consume_topic

Header = tuple[str, bytes | None]


@dataclass(frozen=True)
class Message:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]

    def header(self, name: str) -> bytes | None:
        """The first value of header `name` (None when absent or null)."""
        for key, value in self.headers:
            if key == name:
                return value
        return None

    @property
    def message_id(self) -> str:
        value = self.header("message-id")
        return value.decode() if value is not None else ""


def read_messages(
    bootstrap: str, topic: str, expect: int, timeout: float = 60.0, settle: float = 1.0
) -> list[Message]:
    """Read `topic` from the beginning until `expect` messages arrived (or `timeout`), then
    `settle` seconds more to catch duplicates; in consumption order (per partition: offset
    order)."""
    return consume_topic(bootstrap, topic, expect, _message, timeout, settle)


def _message(message: Any) -> Message:
    raw = message.headers() or []
    pairs = raw.items() if isinstance(raw, dict) else raw
    return Message(
        topic=message.topic() or "",
        partition=message.partition() or 0,
        offset=message.offset() or 0,
        key=message.key(),
        value=message.value(),
        headers=tuple((str(k), v.encode() if isinstance(v, str) else v) for k, v in pairs),
    )


def wait_on_topic(bootstrap: str, topic: str, message_ids: set[str], within: float) -> bool:
    """Consume `topic` from the beginning until every id in `message_ids` was seen (True) or
    `within` seconds passed (False)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"debezium-drain-{topic}-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    missing = set(message_ids)
    deadline = time.monotonic() + within
    try:
        while missing and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.2):
                if message.error() is not None:
                    continue
                raw = message.headers() or []
                pairs = raw.items() if isinstance(raw, dict) else raw
                ids = [v for k, v in pairs if k == "message-id" and isinstance(v, bytes)]
                if ids:
                    missing.discard(ids[0].decode())
    finally:
        consumer.close()
    return not missing


def keys_on_several_partitions(messages: list[Message]) -> dict[str, set[int]]:
    """Keys whose messages landed on more than one partition: their per-key order is lost
    for every consumer (the two relays must partition a key alike)."""
    partitions: dict[str, set[int]] = defaultdict(set)
    for message in messages:
        partitions[(message.key or b"").decode()].add(message.partition)
    return {key: found for key, found in partitions.items() if len(found) > 1}


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    """Best effort: a test's topics are its own; leaving them costs only disk."""
    futures = AdminClient({"bootstrap.servers": bootstrap}).delete_topics(topics)
    for future in futures.values():
        with contextlib.suppress(Exception):
            future.result(30)
