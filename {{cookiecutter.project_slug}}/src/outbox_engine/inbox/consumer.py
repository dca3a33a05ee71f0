"""The inbox consumer: Kafka -> inbox table, then offsets.

Per batch: insert every message with `ON CONFLICT (uuid) DO NOTHING` in one statement
(which commits, with its NOTIFY; store/inbox.py), and only then commit the Kafka offsets of
that batch. A crash before the offset commit means Kafka redelivers and the unique uuid
absorbs the duplicates; nothing is stored twice and nothing is acknowledged before it is
stored. The next batch is fetched while one is stored: a rebalance in between can revoke
partitions whose batch is stored but not yet acknowledged, and then their new owner reads
those messages again, which the uuid absorbs too.

Database errors: a batch the database is unavailable for (connection lost, shutting down,
disk full, ...) is retried as a whole, unacknowledged, until it stores; a batch whose data
is refused (SQLSTATE classes 22, 23, 54) is stored row by row, each refused row reduced to
an "unstorable" row that fails in processing with the reason.

Messages that cannot be processed (oversized, no value, bad key) are stored too, with the
reason in the `rejected` header (inbox/rows.py), and fail in processing: never dropped,
never blocking. Readiness (inbox/readiness.py) is honest: it holds only while Kafka and
PostgreSQL answer and the poll loop turns. librdkafka's lines and the client's errors go
through Python logging, repeats summarised (kafka_logs.py). Every call on the Kafka client
(fetch, commits, checks, lag, close) runs on the consumer's one thread
(inbox/kafka_thread.py says why). A consumer process runs one consumer per inbox box
(inbox/app.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.config.registry import Box
from outbox_engine.inbox.batches import BatchWriter
from outbox_engine.inbox.kafka_thread import ConsumerThread
from outbox_engine.inbox.prefetch import PREFETCH_DEFAULTS
from outbox_engine.inbox.readiness import ConsumerHealth, consumers_readiness
from outbox_engine.inbox.rows import INBOX_NAMESPACE, REJECTED_HEADER
from outbox_engine.inbox.window import check_window
from outbox_engine.observability.observer import Observer
from outbox_engine.store.pgconn import DriverConnections
from outbox_engine.transports.kafka_logs import REPEATS, client_config, log_client_error
from outbox_engine.transports.kafka_reports import describe
from outbox_engine.transports.kafka_settings import settings_checked

log = logging.getLogger(__name__)

# Kept importable from here, where they were defined before the split (the relay reads
# the rejected header's name; the service and tests the readiness answer and the id space).
__all__ = ["INBOX_NAMESPACE", "REJECTED_HEADER", "InboxConsumer", "consumers_readiness"]


def take(consumer: Consumer, size: int, timeout: float) -> list[Message]:
    """Up to `size` messages: wait up to `timeout` for the first, then take what else has
    already arrived without waiting. (`consume(size, timeout)` alone waits until `size`
    messages are there or the timeout ends: below `size` messages a poll, every message
    waited the whole timeout, ~1 s from Kafka to the inbox table at a low rate.)"""
    first = consumer.consume(1, timeout)
    if not first or size <= 1:
        return first
    return first + consumer.consume(size - 1, 0)


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
        kafka_check_interval: float = 30.0,
    ) -> None:
        if box.kind != "inbox":
            raise ValueError(f"box {box.name} is not an inbox box")
        self.box = box
        self.engine = engine
        config = box.inbox_config
        self.group_id = config.group_id or f"{service_name}.{box.name}"
        self.kafka_config = {
            **PREFETCH_DEFAULTS,  # inbox/prefetch.py: the Kafka settings win
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
        self.kafka_check_interval = kafka_check_interval
        # The topic whose metadata the health check asks for: the first named one (a
        # pattern, "^...", names no topic; then None: every topic's).
        self._checked_topic = next(
            (t for t in box.inbox_config.topics if not t.startswith("^")), None
        )
        self.health = ConsumerHealth(box.name)
        self.ready = self.health.ready
        self.readiness = self.health.readiness
        self.poll_timeout = poll_timeout
        self.observer = observer or Observer()
        self.lag_interval = lag_interval
        self.last_poll = 0.0
        self._stopping = asyncio.Event()
        self._consumer: Consumer | None = None
        self._connections = DriverConnections(engine, keep=True)
        self._thread = ConsumerThread(box.name)
        self.writer = BatchWriter(box, self._connections, self.observer, self.health, self._thread)

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        self.writer.on_commit(error, partitions)

    @property
    def stored(self) -> int:
        """Messages stored as new rows (duplicates absorbed are not counted)."""
        return self.writer.stored

    @property
    def received(self) -> int:
        """Messages handed to the database (duplicates included)."""
        return self.writer.received

    @property
    def clashes(self) -> int:
        """Messages whose id was taken by a different payload (stored as rejected rows)."""
        return self.writer.clashes

    async def flush(self) -> None:
        """Wait until every batch read so far is stored and acknowledged."""
        await self.writer.flush()

    @property
    def kafka_problem(self) -> str | None:
        """Why Kafka does not answer (None: it does); see inbox/readiness.py."""
        return self.health.kafka_problem

    @property
    def db_problem(self) -> str | None:
        """Why PostgreSQL does not answer (None: it does)."""
        return self.health.db_problem

    def _on_error(self, error: KafkaError) -> None:
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            # Runs on the consume thread: readiness() reads this at once; the `ready` event
            # follows at the next health check, on the event loop.
            self.health.kafka_problem = f"no Kafka broker reachable ({error.str()})"
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

    async def _health_loop(self, consumer: Consumer) -> None:
        """PostgreSQL every `health_interval`; Kafka every `kafka_check_interval` while it
        answers and every `health_interval` while it does not, on the consumer's Kafka
        thread (behind the fetch in flight) and not awaited, so that a slow answer does not
        hold up the database checks. An outage does not wait for the next check:
        librdkafka's "all brokers down" error sets the problem at once (`_on_error`). Each
        Kafka check is a request queued behind the consumer's long-poll fetch, and asking
        every 5 s was most of an idle consumer's CPU."""
        loop = asyncio.get_running_loop()
        next_kafka = 0.0
        kafka_check: asyncio.Future[None] | None = None
        try:
            while not self._stopping.is_set():
                idle = kafka_check is None or kafka_check.done()
                if idle and (self.health.kafka_problem is not None or loop.time() >= next_kafka):
                    next_kafka = loop.time() + self.kafka_check_interval
                    kafka_check = asyncio.ensure_future(self._check_kafka(consumer))
                await self.health.check_database(self._connections)
                self.health.update_ready()
                REPEATS.sweep()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self.health_interval)
        finally:
            if kafka_check is not None:  # the consumer must not close under it
                await asyncio.gather(kafka_check, return_exceptions=True)

    async def _check_kafka(self, consumer: Consumer) -> None:
        await self._thread.call(self.health.check_kafka, consumer, self._checked_topic)
        self.health.update_ready()

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        with settings_checked(self.kafka_config):
            consumer = Consumer(client_config(self.kafka_config))
        self._consumer = consumer
        topics = list(self.box.inbox_config.topics)
        consumer.subscribe(topics, on_revoke=self.writer.forget)
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
            return self._thread.call(take, consumer, size, self.poll_timeout)

        fetching = fetch()
        try:
            while not self._stopping.is_set():
                messages = await fetching
                # The next batch is fetched while this one is stored and acknowledged.
                fetching = fetch()
                self.last_poll = loop.time()
                if not self.health.polling:
                    self.health.polling = True
                    self.health.update_ready()
                if messages:
                    await self.writer.store(consumer, messages)
                else:
                    await self.flush()  # idle: finish the last write (and raise its error)
                    self.writer.settle(consumer)  # commit again what did not hold
                if loop.time() >= next_lag:
                    next_lag = loop.time() + self.lag_interval
                    await self._thread.call(self._report_lag, consumer)
        finally:
            # Fetched, never stored nor acknowledged: the group's next owner reads it.
            health.cancel()
            await asyncio.gather(fetching, window, health, return_exceptions=True)
            try:
                await self.flush()
                self.writer.settle(consumer)
                await self.flush()
            finally:
                try:
                    await self._thread.call(consumer.close)
                finally:
                    self._thread.close()
            await self._connections.close()
            self._consumer = None
            REPEATS.flush()
            log.info(
                "inbox %s: consumer closed (stored %d new messages)", self.box.name, self.stored
            )

    def _report_lag(self, consumer: Consumer) -> None:
        """Messages between the committed offset and the end of each assigned partition.

        The committed offsets are one request to the group coordinator; the partition ends
        are the high watermarks librdkafka keeps from its fetch responses (which come every
        `fetch.wait.max.ms` even when idle), asked of the broker only for a partition not
        fetched yet. Asking the broker for every partition's end each time cost a consumer
        of five boxes of 8 partitions 4% of a core while idle: those requests queue behind
        the consumer's long-poll fetch and hold a thread per partition for half a second."""
        try:
            assigned = consumer.assignment()
            if not assigned:
                return
            committed = consumer.committed(assigned, timeout=5)
        except KafkaException as exc:
            log.warning("inbox %s: cannot read consumer lag (%s)", self.box.name, exc)
            return
        for tp in committed:
            lag = partition_lag(consumer, tp)
            if lag is not None:
                self.observer.consumer_lag(self.box, tp.topic, tp.partition, lag)


def partition_lag(consumer: Consumer, tp: TopicPartition) -> int | None:
    """Messages after `tp`'s committed offset (`tp.offset`, negative: none committed, then
    counted from the partition's start); None when the broker does not say."""
    low, high = consumer.get_watermark_offsets(tp, cached=True)
    if tp.offset < 0 and high == 0:
        return 0  # nothing was ever written to it
    if high < 0 or (tp.offset < 0 and low < 0):
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=5, cached=False)
        except KafkaException:
            return None
    position = tp.offset if tp.offset >= 0 else low
    return max(high - position, 0)
