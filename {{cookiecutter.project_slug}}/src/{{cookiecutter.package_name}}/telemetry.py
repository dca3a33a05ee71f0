"""OpenTelemetry: tracer provider from the standard OTEL_* variables, FastAPI
instrumentation, and a create middleware that opens a span per create and stores its
context (`traceparent`) in the item's headers, so the relay and the consumer continue the
same trace.
"""

from __future__ import annotations

import logging
from uuid import UUID

from fastapi import FastAPI
from opentelemetry import propagate, trace
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from .messaging.middleware import CreateCall, CreateNext, Middlewares
from .settings import Settings

log = logging.getLogger(__name__)
tracer = trace.get_tracer("{{ cookiecutter.package_name }}.messaging")
_configured = False


def configure_tracing(settings: Settings) -> None:
    """Install a tracer provider once per process; export over OTLP when an endpoint is set."""
    global _configured
    if _configured or settings.otel_sdk_disabled:
        return
    _configured = True
    provider = TracerProvider(
        resource=Resource.create(
            {SERVICE_NAME: settings.otel_service_name or settings.service_name}
        )
    )
    if settings.otel_exporter_otlp_endpoint and settings.otel_traces_exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        log.info("tracing: exporting spans to %s", settings.otel_exporter_otlp_endpoint)
    trace.set_tracer_provider(provider)


def instrument_app(app: FastAPI, settings: Settings) -> None:
    configure_tracing(settings)
    FastAPIInstrumentor.instrument_app(app, excluded_urls="healthz,readyz")


class TracingCreateMiddleware:
    """A span per create; its context travels in the item headers."""

    async def __call__(self, call: CreateCall, call_next: CreateNext) -> list[UUID]:
        name = f"{call.box.name} create"
        with tracer.start_as_current_span(name, kind=trace.SpanKind.PRODUCER) as span:
            span.set_attribute("messaging.system", "outbox")
            span.set_attribute("messaging.destination.name", call.box.name)
            span.set_attribute("messaging.batch.message_count", len(call.items))
            for item in call.items:
                carrier: dict[str, str] = {}
                propagate.inject(carrier)
                item.headers.update(carrier)
            return await call_next(call)


def install_messaging_middlewares(middlewares: Middlewares, settings: Settings) -> None:
    configure_tracing(settings)
    middlewares.create.append(TracingCreateMiddleware())
