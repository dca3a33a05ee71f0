"""The `Observer` that turns the engine's reports into spans and metrics (counters, latency
and size histograms, depth and consumer-lag gauges)."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.trace import SpanKind

from outbox_engine.config.registry import Box
from outbox_engine.observability.observer import Observer, ProcessScope, PublishSpan
from outbox_engine.transports.base import ItemRecord

from .spans import INSTRUMENTATION, Publish, Scope, inject, tracer

# Seconds: from a millisecond relay to a five-minute backlog.
LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    300,
)
SIZE_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)


class _GaugeState:
    def __init__(self) -> None:
        self.depth: dict[str, tuple[int, float, int]] = {}
        self.lag: dict[tuple[str, str, int], int] = {}
        self.slot_lag: dict[str, int] = {}
        self._registered: set[int] = set()

    def register(self, meter: metrics.Meter) -> None:
        if id(meter) in self._registered:
            return
        self._registered.add(id(meter))
        meter.create_observable_gauge(
            "outbox.pending.depth", [self._observe_depth(0)], description="Pending items"
        )
        meter.create_observable_gauge(
            "outbox.pending.oldest_age",
            [self._observe_depth(1)],
            unit="s",
            description="Age of the oldest pending item",
        )
        meter.create_observable_gauge(
            "outbox.pending.deepest_bucket",
            [self._observe_depth(2)],
            description="Pending items in the deepest bucket",
        )
        meter.create_observable_gauge(
            "inbox.consumer.lag",
            [self._observe_lag],
            description="Messages behind the end of a partition",
        )
        meter.create_observable_gauge(
            "outbox.debezium.lag",
            [self._observe_slot_lag],
            unit="By",
            description="WAL the Debezium relay's replication slot holds back",
        )

    def _observe_depth(self, index: int) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def callback(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(values[index], {"box": box}) for box, values in self.depth.items()]

        return callback

    def _observe_lag(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(lag, {"box": box, "topic": topic, "partition": partition})
            for (box, topic, partition), lag in self.lag.items()
        ]

    def _observe_slot_lag(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(lag, {"slot": slot}) for slot, lag in self.slot_lag.items()]


_GAUGES = _GaugeState()


class OtelObserver(Observer):
    """Spans and metrics for every step of the engine."""

    def __init__(self) -> None:
        meter = metrics.get_meter(INSTRUMENTATION)
        self.created_counter = meter.create_counter(
            "outbox.items.created", description="Items created (committed)"
        )
        self.delivered_counter = meter.create_counter(
            "outbox.items.delivered", description="Items delivered"
        )
        self.failed_counter = meter.create_counter(
            "outbox.items.failed_attempts", description="Failed attempts"
        )
        self.retries_counter = meter.create_counter(
            "outbox.items.retries", description="Failed attempts to retry"
        )
        self.dead_counter = meter.create_counter(
            "outbox.items.dead", description="Items failed for good"
        )
        self.discarded_counter = meter.create_counter(
            "outbox.items.discarded", description="Items discarded"
        )
        self.unavailable_counter = meter.create_counter(
            "outbox.items.unavailable",
            description="Attempts cut short by an unreachable destination",
        )
        self.fenced_counter = meter.create_counter(
            "outbox.items.fenced",
            description="Outcomes dropped: the item changed state since this worker claimed it",
        )
        self.order_gaps_counter = meter.create_counter(
            "outbox.order.gaps",
            description="Strict boxes: items delivered although an earlier item of their key failed",
        )
        self.received_counter = meter.create_counter(
            "inbox.messages.received", description="Messages consumed"
        )
        self.stored_counter = meter.create_counter(
            "inbox.messages.stored", description="New messages stored"
        )
        self.batch_seconds = meter.create_histogram(
            "outbox.batch.duration",
            unit="s",
            description="Claim to recorded outcome, per batch",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )
        self.lag_seconds = meter.create_histogram(
            "outbox.delivery.lag",
            unit="s",
            description="Commit to delivery report, per item",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )
        self.batch_items = meter.create_histogram(
            "outbox.batch.size",
            description="Items per claimed batch",
            explicit_bucket_boundaries_advisory=SIZE_BUCKETS,
        )
        # Observable gauges belong to the meter, not to this object: register them once per
        # process and let every observer write to the same state.
        self._depth = _GAUGES.depth
        self._lag = _GAUGES.lag
        self._slot_lag = _GAUGES.slot_lag
        _GAUGES.register(meter)

    def created(self, box: Box, event_names: list[str]) -> None:
        for name in event_names:
            self.created_counter.add(1, {"box": box.name, "event": name})

    def claimed(self, box: Box, count: int) -> None:
        self.batch_items.record(count, {"box": box.name})

    def processing(self, box: Box, item: ItemRecord) -> ProcessScope:
        parent = propagate.extract(item.headers)
        span = tracer().start_span(
            f"{box.name} process",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes={
                "messaging.system": "outbox",
                "messaging.operation.type": "process",
                "messaging.destination.name": box.name,
                "messaging.message.id": str(item.uuid),
                "outbox.item.id": item.id,
                "outbox.event_name": item.event_name,
                "outbox.bucket": item.bucket,
                "outbox.attempt": item.errors_count + 1,
            },
        )
        return Scope(span)

    def outcomes(self, box: Box, results: Sequence[tuple[ItemRecord, str]], seconds: float) -> None:
        # Counted per (outcome, event) first: one counter update per kind, not per item.
        counts = Counter((outcome, item.event_name) for item, outcome in results)
        for (outcome, event), n in counts.items():
            attributes = {"box": box.name, "event": event}
            if outcome == "delivered":
                self.delivered_counter.add(n, attributes)
            elif outcome in ("failed", "dead"):
                self.failed_counter.add(n, attributes)
                (self.dead_counter if outcome == "dead" else self.retries_counter).add(
                    n, attributes
                )
            elif outcome == "discarded":
                self.discarded_counter.add(n, attributes)
            elif outcome == "unavailable":
                self.unavailable_counter.add(n, attributes)
        now = time.time()
        box_attributes = {"box": box.name}
        for item, outcome in results:
            if outcome == "delivered":
                self.lag_seconds.record(max(now - item.created_at.timestamp(), 0.0), box_attributes)
        self.batch_seconds.record(seconds, box_attributes)

    def publishing(self, item: ItemRecord, destination: str) -> PublishSpan:
        span = tracer().start_span(
            f"{destination} publish",
            context=propagate.extract(item.headers),
            kind=SpanKind.PRODUCER,
            attributes={
                "messaging.system": "kafka",
                "messaging.operation.type": "send",
                "messaging.destination.name": destination,
                "messaging.message.id": str(item.uuid),
                "outbox_engine.transports.kafka.message.key": item.event_key,
                "outbox.item.id": item.id,
            },
        )
        return Publish(span)

    @contextlib.contextmanager
    def continuing(self, headers: Mapping[str, Any]) -> Iterator[None]:
        carrier = {k: v for k, v in headers.items() if isinstance(v, str)}
        token = otel_context.attach(propagate.extract(carrier))
        try:
            yield
        finally:
            otel_context.detach(token)

    def received(
        self, box: Box, topic: str, partition: int, offset: int, headers: Mapping[str, str]
    ) -> dict[str, str]:
        span = tracer().start_span(
            f"{topic} receive",
            context=propagate.extract(headers),
            kind=SpanKind.CONSUMER,
            attributes={
                "messaging.system": "kafka",
                "messaging.operation.type": "receive",
                "messaging.destination.name": topic,
                "messaging.destination.partition.id": str(partition),
                "outbox_engine.transports.kafka.offset": offset,
                "messaging.message.id": headers.get("message-id", ""),
                "outbox.box": box.name,
            },
        )
        carrier = inject(span)
        span.end()
        return carrier

    def fenced(self, box: Box, count: int) -> None:
        self.fenced_counter.add(count, {"box": box.name})

    def order_gap(self, box: Box, item: ItemRecord) -> None:
        self.order_gaps_counter.add(1, {"box": box.name})

    def stored(self, box: Box, received: int, stored: int) -> None:
        self.received_counter.add(received, {"box": box.name})
        self.stored_counter.add(stored, {"box": box.name})

    def consumer_lag(self, box: Box, topic: str, partition: int, lag: int) -> None:
        self._lag[(box.name, topic, partition)] = lag

    def depth(self, box: Box, pending: int, oldest_age_seconds: float, deepest_bucket: int) -> None:
        self._depth[box.name] = (pending, oldest_age_seconds, deepest_bucket)

    def slot_lag(self, slot: str, lag_bytes: int | None) -> None:
        if lag_bytes is None:
            self._slot_lag.pop(slot, None)
        else:
            self._slot_lag[slot] = lag_bytes
