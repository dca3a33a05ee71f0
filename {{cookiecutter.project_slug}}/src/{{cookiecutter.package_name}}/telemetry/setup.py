"""Setting OpenTelemetry up in a process: tracer and meter providers, exporters, trace ids on
log records, the `/metrics` route, and `install` (what the container calls)."""

from __future__ import annotations

import logging
import os

from fastapi import FastAPI, Response
from opentelemetry import metrics, trace
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from outbox_engine.middleware import Middlewares
from outbox_engine.observability.observer import Observer

from ..settings import Settings
from .clients import instrument_clients
from .logs import install_log_export
from .observer import OtelObserver
from .spans import TracingCreateMiddleware

log = logging.getLogger(__name__)
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
    """Request spans and /metrics. With OTEL_SDK_DISABLED no span is ever recorded, so the
    request middleware is not installed at all: it would still build span names and
    attributes for every request (~8% of a POST /orders' CPU). /metrics stays."""
    configure(settings)
    if not settings.otel_sdk_disabled:
        FastAPIInstrumentor.instrument_app(app, excluded_urls="healthz,readyz,metrics")

    @app.get("/metrics", include_in_schema=False)
    async def prometheus_metrics() -> Response:
        return Response(render_metrics(), media_type=CONTENT_TYPE_LATEST)


def install(middlewares: Middlewares, settings: Settings) -> Observer:
    """Wire telemetry into the engine; returns the observer (a no-op one when disabled)."""
    configure(settings)
    if settings.otel_sdk_disabled:
        return Observer()
    middlewares.create.append(TracingCreateMiddleware())
    return OtelObserver()
