"""Log records over OTLP, correlated with traces.

With an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT, or OTEL_EXPORTER_OTLP_LOGS_ENDPOINT for
logs alone) and the SDK on, a handler on the root logger sends every record that passes the
service's log level to `<endpoint>/v1/logs` (the compose stack's collector, which hands them
to Loki), in batches from a background thread, besides the usual lines on stderr. A record
logged while a span is current carries that span's trace and span ids, so Grafana links a
log line to its trace and back. `extra=` fields (box, item_id, message_id, ...) become
attributes.

The exporter's own records, and those of the HTTP library it sends with, are not exported:
a failing export would otherwise log about itself into the next export, forever.
"""

from __future__ import annotations

import logging
import os

from opentelemetry._logs import set_logger_provider
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.instrumentation.logging.handler import LoggingHandler
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource

from ..settings import Settings

# Loggers whose records stay local: the exporters' and their HTTP client's.
NOT_EXPORTED = ("opentelemetry", "urllib3", "requests")


class _NotExporter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        name = record.name
        return not any(name == n or name.startswith(n + ".") for n in NOT_EXPORTED)


class _OtlpHandler(LoggingHandler):
    def flush(self) -> None:
        """Nothing to do: the provider exports its batches on its own schedule and at exit.
        (The base class starts a thread to flush; `logging.shutdown` flushes every handler
        at exit, when no thread can start any more, and printed a traceback.)"""


class LogExport:
    """The provider and the root logger's handler; `close` flushes and detaches them."""

    def __init__(self, provider: LoggerProvider, handler: logging.Handler) -> None:
        self.provider = provider
        self.handler = handler

    def flush(self, timeout_millis: int = 10_000) -> bool:
        return self.provider.force_flush(timeout_millis)

    def close(self) -> None:
        logging.getLogger().removeHandler(self.handler)
        self.provider.shutdown()


def logs_endpoint(settings: Settings) -> str | None:
    """Where log records go: the logs endpoint if set, else the OTLP endpoint's /v1/logs;
    nowhere with the standard `OTEL_LOGS_EXPORTER=none`."""
    if os.environ.get("OTEL_LOGS_EXPORTER", "").strip().lower() == "none":
        return None
    specific = os.environ.get("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")
    if specific:
        return specific
    if not settings.otel_exporter_otlp_endpoint:
        return None
    return settings.otel_exporter_otlp_endpoint.rstrip("/") + "/v1/logs"


def export_logs(settings: Settings, resource: Resource) -> LogExport | None:
    """Send the root logger's records over OTLP; None (nothing installed) when the SDK is
    disabled or no endpoint is configured."""
    endpoint = logs_endpoint(settings)
    if settings.otel_sdk_disabled or endpoint is None:
        return None
    provider = LoggerProvider(resource=resource)
    provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=endpoint)))
    handler = _OtlpHandler(logger_provider=provider)
    handler.addFilter(_NotExporter())
    logging.getLogger().addHandler(handler)
    return LogExport(provider, handler)


def install_log_export(settings: Settings, resource: Resource) -> LogExport | None:
    """`export_logs`, with the provider made the process's global one (from `configure`)."""
    export = export_logs(settings, resource)
    if export is not None:
        set_logger_provider(export.provider)
    return export
