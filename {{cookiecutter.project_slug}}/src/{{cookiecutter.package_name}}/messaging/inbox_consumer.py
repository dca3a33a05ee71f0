"""The inbox consumer: Kafka -> inbox table, then offsets.

Per batch: insert every message with `ON CONFLICT (uuid) DO NOTHING` in one transaction,
commit, and only then commit the Kafka offsets. A crash before the offset commit means
Kafka redelivers and the unique uuid absorbs the duplicates; nothing is stored twice and
nothing is acknowledged before it is stored. A new batch is only polled after the previous
one is fully committed, so a rebalance never revokes stored-but-uncommitted offsets.

Messages that cannot be processed (oversized, no value, bad key) are stored too, with the
reason in the `rejected` header, and fail in processing: never dropped, never blocking.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from sqlalchemy import text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from .observe import Observer
from .registry import Box

log = logging.getLogger(__name__)

# Names the message id when a producer sent none: uuid5(NAMESPACE, "topic/partition/offset").
INBOX_NAMESPACE = uuid.UUID("6f1c8a9e-2b8d-4c63-9b6e-3f2f5d0c7a11")
REJECTED_HEADER = "rejected"


def _decode(value: bytes | str | None) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return value.decode("utf-8", "replace")


def message_uuid(headers: dict[str, str], topic: str, partition: int, offset: int) -> uuid.UUID:
    """The message id: `message-id` header, else `Idempotency-Key`, else topic/partition/offset."""
    for name in ("message-id", "idempotency-key"):
        raw = headers.get(name)
        if raw:
            try:
                return uuid.UUID(raw)
            except ValueError:
                return uuid.uuid5(INBOX_NAMESPACE, f"{name}:{raw}")
    return uuid.uuid5(INBOX_NAMESPACE, f"{topic}/{partition}/{offset}")


def _exact(value: bytes | str | None) -> str:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return "hex:" + value.hex()
    return value or ""


def _clean(text: str) -> str:
    """PostgreSQL text and jsonb cannot hold NUL characters."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def unstorable_row(row: dict[str, Any], error: BaseException) -> dict[str, Any]:
    """A row the database refused, reduced to what always stores: it fails in processing
    with the reason instead of blocking its partition."""
    reason = f"unstorable message: {type(error).__name__}: {str(error).splitlines()[0][:300]}"
    return {
        **row,
        "event_name": "unknown",
        "event_key": f"{row['source_topic']}/{row['source_partition']}",
        "payload": b"",
        "headers": {REJECTED_HEADER: _clean(reason)},
    }


def message_row(box: Box, message: Message) -> dict[str, Any]:
    """The inbox row for one Kafka message (never raises: bad input becomes a reason)."""
    config = box.inbox_config
    topic, partition, offset = (
        message.topic() or "",
        message.partition() or 0,
        message.offset() or 0,
    )
    headers: dict[str, str] = {}
    raw_headers = message.headers() or []
    pairs = raw_headers.items() if isinstance(raw_headers, dict) else raw_headers
    id_sources: dict[str, str] = {}
    for name, value in pairs:
        key = _clean(str(name).lower())
        # A repeated header keeps its first value, as most Kafka clients read it.
        headers.setdefault(key, _clean(_decode(value)))
        if key in ("message-id", "idempotency-key") and key not in id_sources:
            # Ids come from the exact bytes: two different undecodable ids must not collide.
            id_sources[key] = _exact(value)
    reasons = []
    raw_key = message.key()
    try:
        event_key = raw_key.decode("utf-8") if isinstance(raw_key, bytes) else (raw_key or "")
    except UnicodeDecodeError:
        event_key = raw_key.hex() if isinstance(raw_key, bytes) else ""
        reasons.append("message key is not UTF-8")
    event_key = _clean(event_key)
    if not event_key:
        # Without a key, the Kafka partition is the ordering unit.
        event_key = f"{topic}/{partition}"
    if len(event_key) > 255:
        reasons.append("message key longer than 255 characters")
        event_key = event_key[:255]
    value = message.value()
    payload = (
        value if isinstance(value, bytes) else (value.encode() if isinstance(value, str) else b"")
    )
    if value is None:
        reasons.append("message has no value")
    if len(payload) > config.max_message_bytes:
        reasons.append(
            f"message of {len(payload)} bytes exceeds max_message_bytes {config.max_message_bytes}"
        )
        payload = b""
    event_name = (headers.get("event-name") or config.default_event_name)[:255]
    if reasons:
        headers[REJECTED_HEADER] = "; ".join(reasons)
    message_id = message_uuid(id_sources, topic, partition, offset)
    return {
        "uuid": message_id,
        "event_name": event_name,
        "event_key": event_key,
        "bucket": box.bucket_for(event_key),
        "payload": payload,
        "headers": headers,
        "source_topic": topic,
        "source_partition": partition,
        "source_offset": offset,
    }


class InboxConsumer:
    def __init__(
        self,
        box: Box,
        engine: AsyncEngine,
        kafka_config: dict[str, Any],
        service_name: str,
        poll_timeout: float = 1.0,
        observer: Observer | None = None,
        lag_interval: float = 10.0,
    ) -> None:
        if box.kind != "inbox":
            raise ValueError(f"box {box.name} is not an inbox box")
        self.box = box
        self.engine = engine
        config = box.inbox_config
        self.group_id = config.group_id or f"{service_name}.{box.name}"
        self.kafka_config = {
            **kafka_config,
            "group.id": self.group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": config.session_timeout_ms,
            "error_cb": self._on_error,
        }
        self.poll_timeout = poll_timeout
        self.observer = observer or Observer()
        self.lag_interval = lag_interval
        self.last_poll = 0.0
        self._stopping = asyncio.Event()
        self._consumer: Consumer | None = None
        self.stored = 0
        self.received = 0
        self.ready = asyncio.Event()
        self._insert = insert(box.table).on_conflict_do_nothing(index_elements=["uuid"])
        self._notify = text("SELECT pg_notify(:channel, '')")

    def _on_error(self, error: KafkaError) -> None:
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            log.error(
                "inbox %s: no Kafka broker reachable (%s); will reconnect",
                self.box.name,
                error.str(),
            )
        else:
            log.warning("inbox %s: kafka: %s", self.box.name, error)

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        consumer = Consumer(self.kafka_config)
        self._consumer = consumer
        topics = list(self.box.inbox_config.topics)
        consumer.subscribe(topics)
        log.info(
            "inbox %s: consuming %s as group %s", self.box.name, ", ".join(topics), self.group_id
        )
        loop = asyncio.get_running_loop()
        next_lag = loop.time() + self.lag_interval
        try:
            while not self._stopping.is_set():
                messages = await asyncio.to_thread(
                    consumer.consume, self.box.inbox_config.consume_batch_size, self.poll_timeout
                )
                self.last_poll = loop.time()
                self.ready.set()
                if messages:
                    await self._store(consumer, messages)
                if loop.time() >= next_lag:
                    next_lag = loop.time() + self.lag_interval
                    await asyncio.to_thread(self._report_lag, consumer)
        finally:
            await asyncio.to_thread(consumer.close)
            self._consumer = None
            log.info(
                "inbox %s: consumer closed (stored %d new messages)", self.box.name, self.stored
            )

    async def _insert_rows(self, rows: list[dict[str, Any]]) -> int:
        async with self.engine.begin() as conn:
            result = await conn.execute(self._insert.returning(self.box.table.c.id), rows)
            inserted = len(result.fetchall())
            if inserted:
                await conn.execute(self._notify, {"channel": self.box.channel})
        return inserted

    async def _insert_one_by_one(self, rows: list[dict[str, Any]]) -> int:
        inserted = 0
        for row in rows:
            try:
                inserted += await self._insert_rows([row])
            except DBAPIError as exc:
                if exc.connection_invalidated or isinstance(exc, OperationalError | InterfaceError):
                    raise
                log.warning(
                    "inbox %s: message at %s/%s refused by the database: %s",
                    self.box.name,
                    row["source_topic"],
                    row["source_offset"],
                    exc.orig,
                )
                inserted += await self._insert_rows([unstorable_row(row, exc.orig or exc)])
        return inserted

    def _report_lag(self, consumer: Consumer) -> None:
        """Messages between the committed offset and the end of each assigned partition."""
        try:
            assigned = consumer.assignment()
            if not assigned:
                return
            committed = consumer.committed(assigned, timeout=5)
        except KafkaException as exc:
            log.warning("inbox %s: cannot read consumer lag (%s)", self.box.name, exc)
            return
        for tp in committed:
            try:
                _low, high = consumer.get_watermark_offsets(tp, timeout=5, cached=False)
            except KafkaException:
                continue
            position = tp.offset if tp.offset >= 0 else _low
            self.observer.consumer_lag(self.box, tp.topic, tp.partition, max(high - position, 0))

    async def _store(self, consumer: Consumer, messages: Sequence[Message]) -> None:
        rows = []
        offsets: dict[tuple[str, int], int] = {}
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    log.warning("inbox %s: consume error: %s", self.box.name, error)
                continue
            row = message_row(self.box, message)
            row["headers"].update(
                self.observer.received(
                    self.box,
                    row["source_topic"],
                    row["source_partition"],
                    row["source_offset"],
                    row["headers"],
                )
            )
            rows.append(row)
            tp = (message.topic() or "", message.partition() or 0)
            offsets[tp] = max(offsets.get(tp, -1), (message.offset() or 0) + 1)
        if not rows:
            return
        self.received += len(rows)
        while True:
            try:
                inserted = await self._insert_rows(rows)
                break
            except DBAPIError as exc:
                if exc.connection_invalidated or isinstance(exc, OperationalError | InterfaceError):
                    # Keep the batch: it is not acknowledged, so retrying loses and doubles nothing.
                    log.error(
                        "inbox %s: database unavailable (%s); retrying the batch",
                        self.box.name,
                        exc,
                    )
                    await asyncio.sleep(1.0)
                    continue
                # The data of some message is refused: store row by row, the refused ones reduced.
                inserted = await self._insert_one_by_one(rows)
                break
            except (OSError, ConnectionError) as exc:
                log.error(
                    "inbox %s: database unavailable (%s); retrying the batch", self.box.name, exc
                )
                await asyncio.sleep(1.0)
        self.stored += inserted
        self.observer.stored(self.box, len(rows), inserted)
        commit = [
            TopicPartition(topic, partition, offset)
            for (topic, partition), offset in offsets.items()
        ]
        try:
            await asyncio.to_thread(consumer.commit, offsets=commit, asynchronous=False)
        except KafkaException as exc:
            # Usually a rebalance took the partitions: the new owner re-reads and the unique
            # uuid drops what we already stored.
            log.warning(
                "inbox %s: offset commit failed (%s); duplicates will be absorbed",
                self.box.name,
                exc,
            )
