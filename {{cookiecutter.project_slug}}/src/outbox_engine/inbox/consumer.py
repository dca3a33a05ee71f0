"""The inbox consumer: Kafka -> inbox table, then offsets.

Per batch: insert every message with `ON CONFLICT (uuid) DO NOTHING` in one statement
(which commits, with its NOTIFY), and only then commit the Kafka offsets of that batch. A
crash before the offset commit means Kafka redelivers and the unique uuid absorbs the
duplicates; nothing is stored twice and nothing is acknowledged before it is stored. The
next batch is fetched while one is stored: a rebalance in between can revoke partitions
whose batch is stored but not yet acknowledged, and then their new owner reads those
messages again, which the uuid absorbs too.

Database errors: a batch the database is unavailable for (connection lost, shutting down,
disk full, ...) is retried as a whole, unacknowledged, until it stores; a batch whose data
is refused (SQLSTATE classes 22, 23, 54) is stored row by row, each refused row reduced to
an "unstorable" row that fails in processing with the reason.

Messages that cannot be processed (oversized, no value, bad key) are stored too, with the
reason in the `rejected` header, and fail in processing: never dropped, never blocking.

Readiness is honest: every `health_interval` the consumer asks Kafka for its topics'
metadata and PostgreSQL for `SELECT 1`; `readiness()` (and the `ready` event) hold only
while both answer and the poll loop turns, and name what is missing otherwise. librdkafka's
lines and the client's errors go through Python logging, repeats summarised (kafka_logs.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import uuid
from collections.abc import Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.config.registry import Box
from outbox_engine.inbox.clash import ClashCheck
from outbox_engine.inbox.window import check_window
from outbox_engine.observability.observer import Observer
from outbox_engine.store.pgconn import DriverConnections, is_data_error, is_unavailable
from outbox_engine.transports.kafka import describe
from outbox_engine.transports.kafka_logs import REPEATS, client_config, log_client_error

log = logging.getLogger(__name__)

# Names the message id when a producer sent none: uuid5(NAMESPACE, "topic/partition/offset").
INBOX_NAMESPACE = uuid.UUID("6f1c8a9e-2b8d-4c63-9b6e-3f2f5d0c7a11")
REJECTED_HEADER = "rejected"
# An insert that takes longer is abandoned (its connection dropped) and the batch retried.
STATEMENT_TIMEOUT = 60.0


def _decode(value: bytes | str | None) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return value.decode("utf-8", "replace")


def message_uuid(
    headers: dict[str, str],
    topic: str,
    partition: int,
    offset: int,
    content: tuple[int, bytes | None, bytes | None] = (0, None, None),
) -> uuid.UUID:
    """The message id: `message-id` header, else `Idempotency-Key`, else derived.

    A derived id covers where the message is (topic/partition/offset) *and* what it is (its
    timestamp, key and value, as `content`): the same message read again (a redelivery, a
    replay) gets the same id, while a different message at the same offset (a topic deleted
    and recreated starts again at 0) does not, so it is stored instead of being dropped as
    a duplicate of the old one."""
    for name in ("message-id", "idempotency-key"):
        raw = headers.get(name)
        if raw:
            try:
                return uuid.UUID(raw)
            except ValueError:
                return uuid.uuid5(INBOX_NAMESPACE, f"{name}:{raw}")
    timestamp, key, value = content
    digest = hashlib.sha256()
    for part in (key, value):
        digest.update(b"-" if part is None else b"+%d:" % len(part))
        digest.update(part or b"")
    return uuid.uuid5(
        INBOX_NAMESPACE, f"{topic}/{partition}/{offset}/{timestamp}/{digest.hexdigest()}"
    )


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
    _kind, timestamp = message.timestamp()
    message_id = message_uuid(
        id_sources,
        topic,
        partition,
        offset,
        (
            timestamp,
            raw_key if isinstance(raw_key, bytes) else None,
            value if isinstance(value, bytes) else None,
        ),
    )
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
        health_interval: float = 5.0,
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
            "on_commit": self._on_commit,
        }
        self.health_interval = health_interval
        # What keeps the consumer from being ready (None: fine), checked every
        # `health_interval`; `ready` is set while both are None and the loop polls.
        self.kafka_problem: str | None = "not checked yet"
        self.db_problem: str | None = "not checked yet"
        self._polling = False
        self._said_ready = False
        self.poll_timeout = poll_timeout
        self.observer = observer or Observer()
        self.lag_interval = lag_interval
        self.last_poll = 0.0
        self._stopping = asyncio.Event()
        self._consumer: Consumer | None = None
        self.stored = 0
        self.received = 0
        self.ready = asyncio.Event()
        self._connections = DriverConnections(engine, keep=True)
        self._writing: asyncio.Task[None] | None = None
        self._clashes = ClashCheck(box.table_name, REJECTED_HEADER)
        # Messages whose id was taken by a different payload (stored as rejected rows).
        self.clashes = 0
        # One statement per batch: the rows as arrays, duplicates dropped by the unique
        # uuid (also within the batch: the first one stays), a NOTIFY when any is new.
        self._insert_sql = f"""
            WITH new AS (
                INSERT INTO {box.table_name} (uuid, event_name, event_key, bucket, payload,
                    headers, source_topic, source_partition, source_offset)
                SELECT u, e, k, b, p, h::jsonb, t, sp, so
                FROM unnest($1::uuid[], $2::text[], $3::text[], $4::integer[], $5::bytea[],
                            $6::text[], $7::text[], $8::integer[], $9::bigint[])
                     AS r(u, e, k, b, p, h, t, sp, so)
                ON CONFLICT (uuid) DO NOTHING
                RETURNING 1
            )
            SELECT count(*)::integer, CASE WHEN count(*) > 0 THEN pg_notify($10, '') END
            FROM new
        """

    def _on_error(self, error: KafkaError) -> None:
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            # Runs on the consume thread: readiness() reads this at once; the `ready` event
            # follows at the next health check, on the event loop.
            self.kafka_problem = f"no Kafka broker reachable ({error.str()})"
            log_client_error(
                log,
                logging.ERROR,
                f"inbox {self.box.name}: no Kafka broker reachable ({error.str()}); "
                "will reconnect, not ready until it answers",
            )
        else:
            log_client_error(
                log, logging.WARNING, f"inbox {self.box.name}: kafka: {describe(error)}"
            )

    def readiness(self) -> tuple[bool, str]:
        """Ready while the poll loop turns, Kafka answers and PostgreSQL answers."""
        reasons = []
        if not self._polling:
            reasons.append("not polling yet")
        if self.kafka_problem is not None:
            reasons.append(f"Kafka: {self.kafka_problem}")
        if self.db_problem is not None:
            reasons.append(f"PostgreSQL: {self.db_problem}")
        if reasons:
            return False, f"inbox {self.box.name} not ready: " + "; ".join(reasons)
        return True, f"inbox {self.box.name}: ok"

    def _update_ready(self) -> None:
        if self.readiness()[0]:
            self.ready.set()
            if not self._said_ready:
                self._said_ready = True
                log.info("inbox %s: ready: Kafka and PostgreSQL answer", self.box.name)
        else:
            self.ready.clear()

    def _check_kafka(self, consumer: Consumer) -> None:
        """Runs on a thread: the subscribed topics' metadata within 3 s, or the reason."""
        try:
            consumer.list_topics(timeout=3.0)
        except KafkaException as exc:
            problem = f"cannot reach Kafka ({describe(exc.args[0])})"
            if self.kafka_problem != problem:
                log.error("inbox %s: %s; not ready until it answers", self.box.name, problem)
            self.kafka_problem = problem
            return
        if self.kafka_problem is not None and self._said_ready:
            log.info("inbox %s: Kafka reachable again", self.box.name)
        self.kafka_problem = None

    async def _check_database(self) -> None:
        try:
            async with asyncio.timeout(5.0), self._connections.acquire() as conn:
                await conn.fetchval("SELECT 1")
        except Exception as exc:  # whatever it is, the database does not answer
            problem = (
                f"cannot reach PostgreSQL ({type(exc).__name__}: {exc or 'no answer within 5 s'})"
            )
            if self.db_problem != problem:
                log.error("inbox %s: %s; not ready until it answers", self.box.name, problem)
            self.db_problem = problem
            return
        if self.db_problem is not None and self._said_ready:
            log.info("inbox %s: PostgreSQL reachable again", self.box.name)
        self.db_problem = None

    async def _health_loop(self, consumer: Consumer) -> None:
        while not self._stopping.is_set():
            await asyncio.gather(
                asyncio.to_thread(self._check_kafka, consumer), self._check_database()
            )
            self._update_ready()
            REPEATS.sweep()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.health_interval)

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        failed = [p for p in partitions if p.error is not None]
        if error is None and not failed:
            return
        # Usually a rebalance took the partitions: the new owner re-reads and the unique
        # uuid drops what we already stored.
        log.warning(
            "inbox %s: offset commit failed (%s); duplicates will be absorbed",
            self.box.name,
            error or failed[0].error,
        )

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        consumer = Consumer(client_config(self.kafka_config))
        self._consumer = consumer
        topics = list(self.box.inbox_config.topics)
        consumer.subscribe(topics)
        # Not awaited: a slow or absent broker must not hold up consuming.
        window = asyncio.ensure_future(asyncio.to_thread(check_window, self.box, self.kafka_config))
        log.info(
            "inbox %s: starting: consuming %s as group %s; waiting for Kafka at %s and PostgreSQL",
            self.box.name,
            ", ".join(topics),
            self.group_id,
            self.kafka_config.get("bootstrap.servers", "?"),
        )
        health = asyncio.ensure_future(self._health_loop(consumer))
        loop = asyncio.get_running_loop()
        next_lag = loop.time() + self.lag_interval
        size = self.box.inbox_config.consume_batch_size

        def fetch() -> asyncio.Future[list[Message]]:
            return asyncio.ensure_future(
                asyncio.to_thread(consumer.consume, size, self.poll_timeout)
            )

        fetching = fetch()
        try:
            while not self._stopping.is_set():
                messages = await fetching
                # The next batch is fetched while this one is stored and acknowledged.
                fetching = fetch()
                self.last_poll = loop.time()
                if not self._polling:
                    self._polling = True
                    self._update_ready()
                if messages:
                    await self._store(consumer, messages)
                else:
                    await self.flush()  # idle: finish the last write (and raise its error)
                if loop.time() >= next_lag:
                    next_lag = loop.time() + self.lag_interval
                    await asyncio.to_thread(self._report_lag, consumer)
        finally:
            # Fetched, never stored nor acknowledged: the group's next owner reads it.
            health.cancel()
            await asyncio.gather(fetching, window, health, return_exceptions=True)
            try:
                await self.flush()
            finally:
                await asyncio.to_thread(consumer.close)
            await self._connections.close()
            self._consumer = None
            REPEATS.flush()
            log.info(
                "inbox %s: consumer closed (stored %d new messages)", self.box.name, self.stored
            )

    async def _insert_rows(self, rows: list[dict[str, Any]]) -> int:
        columns: tuple[list[Any], ...] = ([], [], [], [], [], [], [], [], [])
        for row in rows:
            columns[0].append(row["uuid"])
            columns[1].append(row["event_name"])
            columns[2].append(row["event_key"])
            columns[3].append(row["bucket"])
            columns[4].append(row["payload"])
            columns[5].append(json.dumps(row["headers"]))
            columns[6].append(row["source_topic"])
            columns[7].append(row["source_partition"])
            columns[8].append(row["source_offset"])
        async with self._connections.acquire() as conn:
            inserted: int = await conn.fetchval(
                self._insert_sql, *columns, self.box.channel, timeout=STATEMENT_TIMEOUT
            )
        return inserted

    async def _insert_one_by_one(self, rows: list[dict[str, Any]]) -> int:
        inserted = 0
        for row in rows:
            try:
                inserted += await self._insert_rows([row])
            except Exception as exc:
                if not is_data_error(exc):
                    raise
                log.warning(
                    "inbox %s: message at %s/%s refused by the database: %s",
                    self.box.name,
                    row["source_topic"],
                    row["source_offset"],
                    exc,
                )
                inserted += await self._insert_rows([unstorable_row(row, exc)])
        return inserted

    async def _store_clashes(self, rows: list[dict[str, Any]]) -> int:
        """Some rows were not new: store those whose id is taken by a different payload as
        rejected rows of their own (see inbox_clash.py). Returns the rows stored."""
        while True:
            try:
                async with self._connections.acquire() as conn:
                    clashes = await self._clashes.find(conn, rows, STATEMENT_TIMEOUT)
                if not clashes:
                    return 0
                clash_rows = [self._clashes.clash_row(rows[i]) for i in clashes]
                for row in clash_rows:
                    log.warning(
                        "inbox %s: %s",
                        self.box.name,
                        row["headers"][REJECTED_HEADER],
                    )
                self.clashes += len(clash_rows)
                return await self._insert_rows(clash_rows)
            except Exception as exc:
                if not is_unavailable(exc):
                    raise
                log.error(
                    "inbox %s: database unavailable while checking message ids (%s); retrying",
                    self.box.name,
                    exc,
                )
                await asyncio.sleep(1.0)

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
        # This batch's rows were made while the previous batch was written; its write
        # starts once that one is stored and acknowledged (writes and commits stay in order).
        await self.flush()
        self._writing = asyncio.create_task(self._write(consumer, rows, offsets))
        # Let the write start now: it sends its statement and waits on the database while
        # the next batch is turned into rows. (Without this yield the task would only start
        # at the next `flush()`, after those rows: no overlap at all; 17k -> 22k rows/s.)
        await asyncio.sleep(0)

    async def flush(self) -> None:
        """Wait until every batch handed to `_store` is stored and acknowledged."""
        if self._writing is not None:
            writing, self._writing = self._writing, None
            await writing

    async def _write(
        self, consumer: Consumer, rows: list[dict[str, Any]], offsets: dict[tuple[str, int], int]
    ) -> None:
        self.received += len(rows)
        while True:
            try:
                try:
                    inserted = await self._insert_rows(rows)
                except Exception as exc:
                    if not is_data_error(exc):
                        raise
                    # The data of some message is refused: store row by row, the refused
                    # ones reduced.
                    inserted = await self._insert_one_by_one(rows)
                break
            except Exception as exc:
                if not is_unavailable(exc):
                    raise
                # Keep the batch: it is not acknowledged, so retrying loses and doubles nothing.
                self.db_problem = f"cannot store ({type(exc).__name__}: {exc})"
                self._update_ready()
                REPEATS.log(
                    log,
                    logging.ERROR,
                    f"inbox {self.box.name}: database unavailable or refusing writes "
                    f"({type(exc).__name__}: {exc}); retrying the batch of {len(rows)} "
                    "messages, unacknowledged",
                )
                await asyncio.sleep(1.0)
        if inserted < len(rows):
            inserted += await self._store_clashes(rows)
        self.stored += inserted
        self.observer.stored(self.box, len(rows), inserted)
        commit = [
            TopicPartition(topic, partition, offset)
            for (topic, partition), offset in offsets.items()
        ]
        try:
            # Sent now, confirmed in the background (`_on_commit`): the batch is stored, so a
            # commit that is lost only means the batch is read again, and the uuid absorbs it.
            consumer.commit(offsets=commit, asynchronous=True)
        except KafkaException as exc:
            self._on_commit(exc.args[0], commit)


def consumers_readiness(consumers: Sequence[InboxConsumer]) -> tuple[bool, str]:
    """The `/readyz` answer of a consumer process: ready when every consumer is, otherwise
    each one's reasons (`inbox payments not ready: Kafka: cannot reach Kafka (...)`)."""
    answers = [consumer.readiness() for consumer in consumers]
    problems = [detail for ok, detail in answers if not ok]
    if problems:
        return False, "; ".join(problems)
    return True, f"ok: {len(answers)} inbox consumers"
