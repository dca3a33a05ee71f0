"""Kafka side of the harness: topics, the inbox input, and the reader that checks a run.

The reader reads a topic from the beginning in a thread of the harness, notes when each
message arrived, and stops once it has seen every expected sequence number (or times out).
Delivery counts, duplicates and per-key order come from what it saw, in partition order.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

SEQ_MARK = b'"bench_seq":'


def parse_seq(value: bytes | None) -> int | None:
    """The benchmark sequence number inside a message value, whatever wraps it."""
    if not value:
        return None
    at = value.find(SEQ_MARK)
    if at < 0:
        return None
    start = at + len(SEQ_MARK)
    end = start
    while end < len(value) and 48 <= value[end] <= 57:
        end += 1
    return int(value[start:end]) if end > start else None


def create_topic(bootstrap: str, name: str, partitions: int, patience: float = 300.0) -> None:
    """Create the topic and wait until every partition has a leader. The broker is shared
    (other jobs' fault tests stop and restart it), so keep trying for `patience` seconds."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + patience
    created = False
    while time.monotonic() < deadline:
        try:
            if not created:
                futures = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)
                for future in futures.values():
                    future.result(timeout=60)
                created = True
            topic = admin.list_topics(name, timeout=10).topics.get(name)
        except Exception as exc:
            if "TOPIC_ALREADY_EXISTS" in str(exc):
                created = True
            time.sleep(2.0)
            continue
        if topic is None or len(topic.partitions) != partitions or topic.error:
            time.sleep(0.2)
            continue
        if all(p.leader >= 0 for p in topic.partitions.values()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"topic {name} did not become ready in {patience:.0f}s (broker down?)")


def delete_topics(bootstrap: str, names: list[str]) -> None:
    if not names:
        return
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics(names, operation_timeout=30).values():
        with contextlib.suppress(Exception):
            future.result(timeout=60)


def produce(
    producer: Producer,
    topic: str,
    value: bytes,
    key: bytes,
    headers: list[tuple[str, str | bytes | None]] | None = None,
) -> None:
    """One message into the producer's queue, serving its delivery reports while the queue
    is full (BufferError) rather than dropping the message."""
    while True:
        try:
            producer.produce(topic, value, key, headers=headers)
            return
        except BufferError:
            producer.poll(0.05)


def produce_inbox_input(
    bootstrap: str, topic: str, distinct: int, duplicates: int, keys: int, size: int
) -> int:
    """`distinct` messages with their own message id plus `duplicates` that repeat an earlier
    id (every 10th message repeats the one before it when duplicates = distinct / 9)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    )
    pad = b"x" * max(size - 60, 0)
    sent = 0
    every = max(distinct // max(duplicates, 1), 1)
    ids: list[bytes] = []
    dup_left = duplicates
    for seq in range(distinct):
        message_id = str(uuid.uuid4()).encode()
        ids.append(message_id)
        key = str(seq % keys).encode()
        value = b'{"bench_seq":%d,"pad":"%s"}' % (seq, pad)
        headers: list[tuple[str, str | bytes | None]] = [
            ("message-id", message_id),
            ("event-name", b"payment_received"),
        ]
        for _ in range(2 if (dup_left and seq % every == every - 1) else 1):
            produce(producer, topic, value, key, headers)
            sent += 1
        if dup_left and seq % every == every - 1:
            dup_left -= 1
        if seq % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(60)
    if remaining:
        raise RuntimeError(f"{remaining} inbox input messages not delivered")
    return sent


@dataclass
class Seen:
    partition: int
    offset: int
    key: bytes | None
    seq: int
    at: float


@dataclass
class ReadResult:
    messages: list[Seen] = field(default_factory=list)
    first_at: dict[int, float] = field(default_factory=dict)
    # The Kafka timestamp of each sequence number's first copy, when the producer stamped it
    # (CreateTime: librdkafka and aiokafka take the clock when produce()/send() is called,
    # in whole milliseconds); none for a broker-stamped (LogAppendTime) message.
    created_at: dict[int, float] = field(default_factory=dict)
    unparsed: int = 0

    @property
    def distinct(self) -> int:
        return len(self.first_at)

    def duplicates(self) -> int:
        return len(self.messages) - self.distinct

    def order_violations(self) -> int:
        """First deliveries of a key whose sequence number is below one seen before for that
        key (a key lives in one partition, so partition order is delivery order)."""
        latest: dict[bytes | None, int] = {}
        seen: set[int] = set()
        violations = 0
        for m in sorted(self.messages, key=lambda m: (m.partition, m.offset)):
            if m.seq in seen:
                continue
            seen.add(m.seq)
            if m.seq < latest.get(m.key, -1):
                violations += 1
            latest[m.key] = max(latest.get(m.key, -1), m.seq)
        return violations

    def keyless(self) -> int:
        return sum(1 for m in self.messages if not m.key)

    def span(self) -> float:
        """Seconds from the first to the last first-delivery seen."""
        if len(self.first_at) < 2:
            return 0.0
        times = self.first_at.values()
        return max(times) - min(times)


class TopicReader(threading.Thread):
    """Reads every partition of `topic` from the start until `expected` distinct sequence
    numbers were seen, `stop()` is called, or `timeout` passes. `parse` finds a message's
    sequence number in its value (default: the benchmark's `"bench_seq":N`)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        expected: int,
        parse: Callable[[bytes | None], int | None] = parse_seq,
    ) -> None:
        super().__init__(daemon=True, name=f"reader:{topic}")
        self.expected = expected
        self._parse = parse
        self.result = ReadResult()
        self._stop_flag = threading.Event()
        self.complete = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-reader-{uuid.uuid4()}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
                "enable.partition.eof": False,
            }
        )
        self._consumer.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
        )

    def stop(self) -> None:
        self._stop_flag.set()

    def run(self) -> None:
        result = self.result
        try:
            while not self._stop_flag.is_set():
                # poll() returns at the first message; consume(timeout=0) takes what else is
                # there. (consume(n, timeout) alone would wait for n messages or the timeout,
                # adding up to the timeout to every latency.)
                first = self._consumer.poll(0.05)
                if first is None:
                    continue
                batch = [first, *self._consumer.consume(1000, 0)]
                now = time.time()
                for message in batch:
                    if message.error() is not None:
                        continue
                    seq = self._parse(message.value())
                    if seq is None:
                        result.unparsed += 1
                        continue
                    result.messages.append(
                        Seen(
                            message.partition() or 0,
                            message.offset() or 0,
                            message.key(),
                            seq,
                            now,
                        )
                    )
                    if seq not in result.first_at:
                        result.first_at[seq] = now
                        kind, stamp = message.timestamp()
                        if kind == TIMESTAMP_CREATE_TIME:
                            result.created_at[seq] = stamp / 1000
                if len(result.first_at) >= self.expected:
                    self.complete.set()
                    break
        finally:
            self._consumer.close()

    def wait(self, timeout: float) -> bool:
        """True when every expected message was seen within `timeout` seconds."""
        done = self.complete.wait(timeout)
        self.stop()
        self.join(10)
        return done
