"""The worker's readiness: what it waits for, and what `/readyz` says.

A worker is ready when its lock connection to PostgreSQL is up (the rebalance loop in
relay/worker.py reports it) and, if a box relays to Kafka, Kafka answers a metadata request
for the first Kafka transport's topic (checked here every `kafka_check_interval`; not the
whole cluster's metadata, which costs CPU in proportion to its topics). After each check,
the producer replaces its client if it is stuck (`KafkaProducer.recover`, see
transports/kafka_stuck.py). When Kafka answers again after failed checks, or the client was
replaced, `recovered` fires: the lanes of the boxes that relay to Kafka (`kafka_transports`)
that are backing off from an outage try again at once (relay/lanes.py). "worker ready" is
logged once, the first time both answer; an outage is logged when it starts and when it
ends, never per check, so a long outage does not flood the log. The startup helpers
(`checked_topic`, `describe_dsn`, `kafka_timeout_warnings`) say what the worker will wait
for and warn about settings that would turn a Kafka outage into consumed retries.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from urllib.parse import urlsplit

from outbox_engine.config.registry import Box
from outbox_engine.relay.pacing import Pacer, Pulse
from outbox_engine.transports.base import TransportUnavailable
from outbox_engine.transports.builtin import KafkaTransport
from outbox_engine.transports.kafka import KafkaProducer

# The worker's lines keep the logger they always had (log filters and dashboards use it).
log = logging.getLogger("outbox_engine.relay.worker")


def kafka_timeout_warnings(boxes: Iterable[Box], producer_config: dict[str, object]) -> list[str]:
    """Boxes with a Kafka transport whose `transport_timeout_seconds` runs out before the
    producer's `message.timeout.ms`: a Kafka outage would cost them a retry (the relay's own
    timeout counts as a failed attempt; the producer's delivery timeout does not)."""
    try:
        producer_ms = float(str(producer_config.get("message.timeout.ms", 300_000)))
    except ValueError:
        return []
    warnings = []
    for box in boxes:
        if not kafka_transports(box):
            continue
        if box.config.transport_timeout_seconds * 1000 <= producer_ms:
            warnings.append(
                f"box {box.name}: transport_timeout_seconds "
                f"{box.config.transport_timeout_seconds:g} is not longer than the Kafka "
                f"producer's message.timeout.ms {producer_ms:g}: a Kafka outage will count "
                "as failed attempts; make it longer (see docs/guarantees.md)"
            )
    return warnings


def describe_dsn(dsn: str) -> str:
    """Where a DSN points, without user or password: `host:port/database`."""
    try:
        parts = urlsplit(dsn)
        return f"{parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path or '/'}"
    except ValueError:
        return "the configured database"


def kafka_transports(box: Box) -> list[KafkaTransport]:
    """The Kafka transports of an outbox box, in configuration order (an inbox box's
    transports are its handlers: none)."""
    if box.kind != "outbox":
        return []
    return [b.transport for b in box.transports if isinstance(b.transport, KafkaTransport)]


def checked_topic(boxes: Iterable[Box]) -> str | None:
    """The topic whose metadata the Kafka check asks for: the first Kafka transport's own,
    one the worker produces to (where the cluster creates topics on first use, the first
    check creates it, as the first delivery would); None when no outbox box relays to
    Kafka (then Kafka is not part of readiness)."""
    for box in boxes:
        for transport in kafka_transports(box):
            return transport.topic
    return None


class WorkerHealth:
    """The worker's readiness state. `ready` is set by the rebalance loop while the lock
    connection is up; `kafka_problem` by `kafka_loop`; `owned()` counts the owned buckets."""

    def __init__(
        self,
        boxes: Sequence[Box],
        concurrency: int,
        producer: KafkaProducer,
        dsn: str,
        owned: Callable[[], int],
        kafka_check_interval: float,
    ) -> None:
        self.boxes = boxes
        self.concurrency = concurrency
        self.producer = producer
        self.database = describe_dsn(dsn)
        self.owned = owned
        self.ready = asyncio.Event()
        # What keeps the worker from being ready (None: fine). Kafka counts only when a box
        # relays to it; its first check ends before `ready` is first set.
        self.db_problem: str | None = "not connected yet"
        self.kafka_topic = checked_topic(boxes)
        self.uses_kafka = self.kafka_topic is not None
        self.kafka_problem: str | None = "not checked yet" if self.uses_kafka else None
        self.kafka_check_interval = kafka_check_interval
        self.kafka_checked = asyncio.Event()
        # Fired when Kafka may be back for the lanes: see the module's docstring.
        self.recovered = Pulse()
        if not self.uses_kafka:
            self.kafka_checked.set()
        self._said_ready = False

    def waits_for(self) -> str:
        """What the worker waits for at start, for its first log line."""
        waits = f"PostgreSQL at {self.database}"
        if self.uses_kafka:
            servers = self.producer.config.get("bootstrap.servers", "?")
            waits += f" and Kafka at {servers}"
        return waits

    async def kafka_loop(self, pacer: Pacer) -> None:
        """Ask Kafka for metadata now and then: readiness says whether it answers."""
        if not self.uses_kafka:
            return
        producer = self.producer
        while not pacer.stopped:
            try:
                producer.start()
                await producer.check(wait_seconds=3.0, topic=self.kafka_topic)
                if self.kafka_problem is not None:
                    if self.kafka_checked.is_set():
                        log.info("Kafka reachable again")
                    # Also at the first answer: lanes that found no broker before it (the
                    # worker started first) back off too.
                    self.recovered.fire()
                self.kafka_problem = None
            except TransportUnavailable as exc:
                if self.kafka_problem is None or not self.kafka_checked.is_set():
                    log.error(
                        "cannot reach Kafka (%s); items stay pending, no retry consumed; "
                        "not ready until it answers",
                        exc,
                    )
                self.kafka_problem = f"cannot reach Kafka ({exc})"
            # A client that cannot write to partitions the cluster leads, or that has not
            # reached a cluster a new client reaches, is replaced (logged there; see
            # transports/kafka_stuck.py). The next check asks through the new one.
            if await producer.recover() is not None:
                self.recovered.fire()  # the next attempt goes through the new client
            self.kafka_checked.set()
            self.announce()
            await pacer.sleep(self.kafka_check_interval)

    def announce(self) -> None:
        """Log "worker ready" the first time PostgreSQL and Kafka both answer."""
        if self._said_ready or not self.ready.is_set() or self.kafka_problem is not None:
            return
        self._said_ready = True
        log.info(
            "worker ready: boxes %s, concurrency %d, %d buckets owned",
            ", ".join(b.name for b in self.boxes),
            self.concurrency,
            self.owned(),
        )

    def readiness(self) -> tuple[bool, str]:
        """Ready when the lock connection is up and, if a box relays to Kafka, Kafka answers;
        otherwise "not ready: " and each reason."""
        reasons = []
        if not self.ready.is_set():
            reasons.append(
                f"not connected to PostgreSQL (lock connection): {self.db_problem or 'connecting'}"
            )
        if self.kafka_problem is not None:
            reasons.append(self.kafka_problem)
        if reasons:
            return False, "not ready: " + "; ".join(reasons)
        return True, f"ok: {self.owned()} buckets owned"
