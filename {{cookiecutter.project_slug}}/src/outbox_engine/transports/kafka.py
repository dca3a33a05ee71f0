"""An asyncio face for confluent-kafka's producer.

librdkafka batches, retries and (with idempotence) keeps per-partition order by itself; what
it needs from us is a thread that serves its delivery callbacks. That thread collects the
reports and hands them to the event loop in bulk, one wake-up per poll rather than one per
message, so a relay can wait for thousands of delivery reports at little cost.

librdkafka's own log lines and the producer's client errors go through Python logging,
repeats summarised once per window (see kafka_logs.py): a broker that is down costs a few
lines per half minute, not several per second.

A client stuck after a cluster restart (it cannot write to partitions the cluster leads,
or cannot reach a cluster a new client reaches) is replaced by `recover()`: see
kafka_stuck.py.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any, cast

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from outbox_engine.transports.base import TransportUnavailable
from outbox_engine.transports.kafka_client import PollingClient, led_partitions, new_client_answers
from outbox_engine.transports.kafka_logs import REPEATS, log_client_error
from outbox_engine.transports.kafka_reports import (
    Deliveries,
    OutgoingMessage,
    classify,
    describe,
    track,
)
from outbox_engine.transports.kafka_stuck import StuckPartitions

log = logging.getLogger(__name__)

DEFAULT_PRODUCER_CONFIG: dict[str, Any] = {
    "enable.idempotence": True,
    "acks": "all",
    # Keys hashed as Kafka's Java producer does (murmur2), so a key lands on the same
    # partition whichever relay sends it: Debezium on Kafka Connect (a Java producer) or
    # this worker. librdkafka's own default (CRC32) would split a key over two partitions
    # across a switch between the relays, and per-key order with it.
    "partitioner": "murmur2_random",
    "linger.ms": 1,
    "batch.num.messages": 10_000,
    "queue.buffering.max.messages": 200_000,
    # A delivery that cannot complete in this time is reported as an outage, and the item
    # stays pending for the next attempt (no retry consumed). Below the boxes' default
    # `transport_timeout_seconds` (30 s), which counts as a failed attempt when it runs out.
    "message.timeout.ms": 25_000,
    "socket.keepalive.enable": True,
}


class KafkaProducer:
    """One idempotent producer per process, shared by every Kafka transport.

    `recover()` (called by the worker after each Kafka check) replaces the librdkafka
    client when it is stuck (kafka_stuck.py). At most once per `replace_interval`
    seconds; the client replaced is flushed (its messages delivered or timed out, their
    reports served) and closed in the background.
    """

    def __init__(
        self,
        config: dict[str, Any],
        stuck_after_seconds: float = 60.0,
        replace_interval: float = 300.0,
    ) -> None:
        self._config = {**DEFAULT_PRODUCER_CONFIG, **config}
        self._client: PollingClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reports: deque[tuple[asyncio.Future[None], KafkaError | None]] = deque()
        self._reports_lock = threading.Lock()
        self._drain_scheduled = False
        self.stuck = StuckPartitions(stuck_after_seconds)
        self.replace_interval = replace_interval
        self.replacements = 0  # clients replaced since start
        self._replaced_at: float | None = None
        self._retiring: dict[asyncio.Task[None], PollingClient] = {}  # replaced, flushing
        self._checked_topic: str | None = None  # the topic the checks ask for
        self._failing_since: float | None = None  # the checks fail since (monotonic)
        self._probed_at = float("-inf")  # the last new client asked (see recover)

    @property
    def config(self) -> dict[str, Any]:
        return dict(self._config)

    def start(self) -> None:
        if self._client is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._client = PollingClient({**self._config, "error_cb": self._on_error})

    def _on_error(self, error: KafkaError) -> None:
        log_client_error(log, logging.WARNING, f"kafka producer: {describe(error)}")

    def _on_delivery(self, future: asyncio.Future[None], error: KafkaError | None) -> None:
        # Runs on the poll thread: queue the report and wake the loop at most once per batch.
        with self._reports_lock:
            self._reports.append((future, error))
            if self._drain_scheduled:
                return
            self._drain_scheduled = True
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        with self._reports_lock:
            reports = list(self._reports)
            self._reports.clear()
            self._drain_scheduled = False
        for future, error in reports:
            if future.done():
                continue
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(classify(error))

    def _producer(self) -> Producer:
        if self._client is None or self._loop is None:
            raise TransportUnavailable("kafka producer is not started")
        return self._client.producer

    def produce(
        self,
        topic: str,
        value: bytes,
        key: bytes | None,
        headers: Sequence[tuple[str, bytes]],
    ) -> asyncio.Future[None]:
        """Hand one message to librdkafka; the future completes with its delivery report."""
        producer = self._producer()
        assert self._loop is not None
        future: asyncio.Future[None] = self._loop.create_future()
        stuck = self.stuck

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            track(stuck, err, msg)
            self._on_delivery(future, err)

        while True:
            try:
                producer.produce(topic, value, key, headers=list(headers), on_delivery=on_delivery)
                return future
            except BufferError:
                # The local queue is full: let the poll thread drain it, then try again.
                producer.poll(0.01)
            except KafkaException as exc:
                future.set_exception(classify(exc.args[0]))
                return future

    def produce_batch(
        self, messages: Sequence[OutgoingMessage]
    ) -> asyncio.Future[list[Exception | None]]:
        """Hand messages to librdkafka in this order; the future completes once every one
        has its delivery report, with one entry per message: None (delivered) or the
        exception `classify` makes of its error. This is the relay's path: thousands of
        messages cost one future and one wake-up of the event loop."""
        producer = self._producer()
        assert self._loop is not None
        deliveries = Deliveries(self._loop, len(messages), self.stuck)
        report = deliveries.report
        for index, (topic, value, key, headers) in enumerate(messages):
            callback = functools.partial(report, index)
            while True:
                try:
                    producer.produce(
                        topic, value, key, headers=cast(Any, headers), on_delivery=callback
                    )
                    break
                except BufferError:
                    # The local queue is full: let the poll thread drain it, then try again.
                    producer.poll(0.01)
                except KafkaException as exc:
                    report(index, exc.args[0])
                    break
        return deliveries.future

    async def check(self, wait_seconds: float = 3.0, topic: str | None = None) -> None:
        """Raise TransportUnavailable unless the cluster answers a metadata request: for
        `topic` alone, or (None) for every topic. Name a topic: a cluster's whole metadata
        is built into Python objects, every partition of every topic, each time (1,229
        topics of 4,598 partitions on the bench machine: 27 ms of CPU a check; one topic:
        0.4 ms)."""
        producer = self._producer()
        self._checked_topic = topic
        try:
            await asyncio.to_thread(producer.list_topics, topic, timeout=wait_seconds)
        except KafkaException as exc:
            # Timeouts while the cluster does not answer are an outage, not a stuck client:
            # a partition's streak starts again once it answers.
            self.stuck.forget()
            if self._failing_since is None:
                self._failing_since = time.monotonic()
            raise TransportUnavailable(f"kafka: {describe(exc.args[0])}") from None
        self._failing_since = None

    async def recover(self, wait_seconds: float = 3.0) -> str | None:
        """Replace the client if it is stuck (see kafka_stuck.py); the reason, or None.

        Stuck: (a) the checks pass, and partitions have timed out for `stuck_after_seconds`
        while the cluster lists their leaders (a partition without one is an outage, which
        a new client would not end); or (b) the checks have failed for
        `stuck_after_seconds` while a new client's metadata request, made here (at most once
        per `stuck_after_seconds`), is answered."""
        client = self._client
        now = time.monotonic()
        if client is None:
            return None
        last = self._replaced_at
        if last is not None and now - last < self.replace_interval:
            return None
        after = self.stuck.after_seconds
        reason = None
        if self._failing_since is None:
            stuck = self.stuck.stuck()
            led = await led_partitions(client.producer, stuck, wait_seconds) if stuck else []
            if led:
                reason = (
                    f"messages to {', '.join(f'{t}[{p}]' for t, p in led)} timed out for "
                    f"{after:g} s or more while the cluster answered and listed their leaders"
                )
        elif now - self._failing_since >= after and now - self._probed_at >= after:
            answered = await new_client_answers(self._config, self._checked_topic, wait_seconds)
            self._probed_at = time.monotonic()  # the next one a full interval after this
            if answered:
                reason = (
                    f"its metadata requests failed for {now - self._failing_since:.0f} s "
                    "while a new client's was answered"
                )
        if reason is not None and self._client is client:
            self.replace(reason)
            self._failing_since = None
            return reason
        return None

    def replace(self, reason: str) -> None:
        """Start a new client for what is produced from now on; flush and close the old one
        in the background (its batches get their reports)."""
        old = self._client
        if old is None or self._loop is None:
            return
        self._client = PollingClient({**self._config, "error_cb": self._on_error})
        self.stuck.forget()
        self.replacements += 1
        self._replaced_at = time.monotonic()
        log.warning(
            "kafka producer: %s; replaced the producer's client (librdkafka instance), "
            "replacement %d (at most one every %g s); items stay pending, no retry consumed",
            reason,
            self.replacements,
            self.replace_interval,
        )
        flush_seconds = float(self._config.get("message.timeout.ms", 300_000)) / 1000 + 5.0
        task = self._loop.create_task(self._retire(old, flush_seconds))
        self._retiring[task] = old
        task.add_done_callback(lambda done: self._retiring.pop(done, None))

    async def _retire(self, client: PollingClient, wait_seconds: float) -> None:
        remaining = await client.close(wait_seconds)
        if remaining:
            log.warning("replaced kafka producer closed with %d undelivered messages", remaining)

    async def close(self, wait_seconds: float = 10.0) -> None:
        if self._retiring:
            # A replaced client still flushing gets the same time, then what it holds is
            # purged (reported as not delivered: those items stay pending).
            await asyncio.wait(list(self._retiring), timeout=wait_seconds)
            for client in self._retiring.values():
                client.producer.purge()
            await asyncio.gather(*self._retiring, return_exceptions=True)
        if self._client is None:
            return
        remaining = await self._client.close(wait_seconds)
        if remaining:
            log.warning("kafka producer closed with %d undelivered messages", remaining)
        self._drain()
        self._client = None
        REPEATS.flush()
