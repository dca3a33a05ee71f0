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
  (`telemetry.clients`).
- Log records get `trace_id` and `span_id` when a span is current; with an OTLP endpoint
  they are exported over OTLP too (`telemetry.logs`).

Configuration is the standard OTEL_* environment (OTEL_SDK_DISABLED, OTEL_SERVICE_NAME,
OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_SAMPLER, ...).

The package: `setup` (providers, exporters, the log filter, `/metrics`, `install`), `spans`
(the engine's tracer and the create/process/publish spans), `observer` (the `Observer` that
turns the engine's reports into spans and metrics), `clients` (SQL and httpx client spans),
`logs` (OTLP log export).
"""

from __future__ import annotations

from .observer import OtelObserver
from .setup import configure, install, instrument_app, render_metrics

__all__ = ["OtelObserver", "configure", "install", "instrument_app", "render_metrics"]
