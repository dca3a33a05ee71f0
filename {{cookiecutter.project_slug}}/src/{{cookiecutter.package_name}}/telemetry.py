"""OpenTelemetry for the service: traces, metrics and log correlation.

- Traces follow each message end to end. The HTTP request (FastAPI instrumentation) is the
  parent of the `create` span, whose context is stored in the item's headers; the worker's
  `process` span continues it, the Kafka `publish` span (ended by the delivery report)
  carries it in Kafka headers, the consumer's `receive` span continues it into the inbox
  item, and the handler's `process` span is the parent of anything the handler creates.
- Metrics use the OpenTelemetry API and are served in Prometheus format (`/metrics` on the
  api, and on the probe port of worker and consumer); with OTEL_EXPORTER_OTLP_ENDPOINT set
  they are pushed over OTLP too.
- Client spans: one per SQL statement inside a trace, one per httpx request
  (`telemetry_clients`).
- Log records get `trace_id` and `span_id` when a span is current; with an OTLP endpoint
  they are exported over OTLP too (`telemetry_logs`).

Configuration is the standard OTEL_* environment (OTEL_SDK_DISABLED, OTEL_SERVICE_NAME,
OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_SAMPLER, ...).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any
from uuid import UUID

from fastapi import FastAPI, Response
from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from outbox_engine.config.registry import Box
from outbox_engine.middleware import CreateCall, CreateNext, Middlewares
from outbox_engine.observability.observer import Observer, ProcessScope, PublishSpan
from outbox_engine.relay.failures import failure_text
from outbox_engine.transports.base import ItemRecord

from .settings import Settings
from .telemetry_clients import instrument_clients
from .telemetry_logs import install_log_export

log = logging.getLogger(__name__)
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
INSTRUMENTATION = "outbox_engine"
_configured = False


def configure(settings: Settings) -> None:
    """Install tracer and meter providers once per process."""
    global _configured
    if _configured:
        return
    _configured = True
    if settings.otel_sdk_disabled:
        return
    resource = Resource.create({SERVICE_NAME: settings.otel_service_name or settings.service_name})
    tracer_provider = TracerProvider(resource=resource)
    readers: list[MetricReader] = []
    from opentelemetry.exporter.prometheus import PrometheusMetricReader

    readers.append(PrometheusMetricReader())
    endpoint = settings.otel_exporter_otlp_endpoint
    if endpoint:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        if settings.otel_traces_exporter == "otlp":
            spans = OTLPSpanExporter(endpoint=_signal_endpoint(endpoint, "traces"))
            tracer_provider.add_span_processor(BatchSpanProcessor(spans))
        metric_exporter = OTLPMetricExporter(endpoint=_signal_endpoint(endpoint, "metrics"))
        readers.append(PeriodicExportingMetricReader(metric_exporter))
        log.info("telemetry: exporting to %s", endpoint)
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))
    for handler in logging.getLogger().handlers:
        handler.addFilter(TraceContextFilter())
    instrument_clients(tracer_provider)
    install_log_export(settings, resource)


def _signal_endpoint(endpoint: str, signal: str) -> str:
    """OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT if set, else the endpoint's /v1/<signal> (the
    endpoint comes from the settings, which may read it from a file the exporter does not
    see, so it is passed explicitly)."""
    specific = os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
    return specific or f"{endpoint.rstrip('/')}/v1/{signal}"


class TraceContextFilter(logging.Filter):
    """Adds the current trace and span ids to every log record."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            record.trace_id = format(context.trace_id, "032x")
            record.span_id = format(context.span_id, "016x")
        return True


def render_metrics() -> bytes:
    return generate_latest()


def instrument_app(app: FastAPI, settings: Settings) -> None:
    configure(settings)
    FastAPIInstrumentor.instrument_app(app, excluded_urls="healthz,readyz,metrics")

    @app.get("/metrics", include_in_schema=False)
    async def prometheus_metrics() -> Response:
        return Response(render_metrics(), media_type=CONTENT_TYPE_LATEST)


_tracers: dict[int, trace.Tracer] = {}


def _tracer() -> trace.Tracer:
    """The engine's tracer, looked up once per tracer provider (the lookup is not cheap)."""
    provider = trace.get_tracer_provider()
    tracer = _tracers.get(id(provider))
    if tracer is None:
        tracer = _tracers[id(provider)] = trace.get_tracer(INSTRUMENTATION)
    return tracer


def _inject(span: Span) -> dict[str, str]:
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    return carrier


def _finish(span: Span, error: BaseException | None) -> None:
    if error is not None:
        # Not span.record_exception: its message and stack trace carry str(error), which for
        # a database error holds the statement's parameters (payload values). The same text
        # as last_error instead (outbox_engine/relay/failures.py).
        text = failure_text(error)
        span.add_event(
            "exception",
            {"exception.type": type(error).__qualname__, "exception.message": text},
        )
        span.set_status(Status(StatusCode.ERROR, text[:200]))
    span.end()


class TracingCreateMiddleware:
    """A span per create/create_batch; its context travels in the items' headers."""

    async def __call__(self, call: CreateCall, call_next: CreateNext) -> list[UUID]:
        attributes: dict[str, str | int] = {
            "messaging.system": "outbox",
            "messaging.operation.type": "create",
            "messaging.destination.name": call.box.name,
            "messaging.batch.message_count": len(call.items),
        }
        with _tracer().start_as_current_span(
            f"{call.box.name} create", kind=SpanKind.PRODUCER, attributes=attributes
        ) as span:
            carrier = _inject(span)
            for item in call.items:
                item.headers.update(carrier)
            return await call_next(call)


class _Scope(ProcessScope):
    def __init__(self, span: Span) -> None:
        self.span = span
        self.headers = _inject(span)
        self._token: object | None = None

    def __enter__(self) -> _Scope:
        self._token = otel_context.attach(trace.set_span_in_context(self.span))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._token is not None:
            otel_context.detach(self._token)  # type: ignore[arg-type]
            self._token = None

    def end(self, error: BaseException | None = None) -> None:
        _finish(self.span, error)


class _Publish(PublishSpan):
    def __init__(self, span: Span) -> None:
        self.span = span

    def headers(self) -> dict[str, str]:
        return _inject(self.span)

    def end(self, error: BaseException | None = None) -> None:
        _finish(self.span, error)


class _GaugeState:
    def __init__(self) -> None:
        self.depth: dict[str, tuple[int, float, int]] = {}
        self.lag: dict[tuple[str, str, int], int] = {}
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

    def _observe_depth(self, index: int) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def callback(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(values[index], {"box": box}) for box, values in self.depth.items()]

        return callback

    def _observe_lag(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(lag, {"box": box, "topic": topic, "partition": partition})
            for (box, topic, partition), lag in self.lag.items()
        ]


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
        _GAUGES.register(meter)

    def created(self, box: Box, event_names: list[str]) -> None:
        for name in event_names:
            self.created_counter.add(1, {"box": box.name, "event": name})

    def claimed(self, box: Box, count: int) -> None:
        self.batch_items.record(count, {"box": box.name})

    def processing(self, box: Box, item: ItemRecord) -> ProcessScope:
        parent = propagate.extract(item.headers)
        span = _tracer().start_span(
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
        return _Scope(span)

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
        span = _tracer().start_span(
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
        return _Publish(span)

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
        span = _tracer().start_span(
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
        carrier = _inject(span)
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


def install(middlewares: Middlewares, settings: Settings) -> Observer:
    """Wire telemetry into the engine; returns the observer (a no-op one when disabled)."""
    configure(settings)
    if settings.otel_sdk_disabled:
        return Observer()
    middlewares.create.append(TracingCreateMiddleware())
    return OtelObserver()
