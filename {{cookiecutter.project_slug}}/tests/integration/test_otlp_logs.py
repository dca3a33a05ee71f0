"""Log records over OTLP: a real HTTP endpoint on 127.0.0.1 receives `/v1/logs` protobuf
from the service's own set-up (`configure`, in a process of its own, as the service runs),
each record with the trace of the span it was logged in."""

from __future__ import annotations

import asyncio
import gzip
import logging
import os
import sys
import uuid
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.sdk.resources import Resource

from {{ cookiecutter.package_name }}.container import Container
from {{ cookiecutter.package_name }}.telemetry.logs import export_logs

# What the service process logs, then prints: the ids of the span it logged inside.
SERVICE = """
import logging, sys
from opentelemetry import trace
from {{ cookiecutter.package_name }}.logging_setup import configure_logging
from {{ cookiecutter.package_name }}.settings import load_settings
from {{ cookiecutter.package_name }}.telemetry import configure

marker = sys.argv[1]
configure_logging("INFO", "json")
configure(load_settings())
log = logging.getLogger("{{ cookiecutter.package_name }}.work")
log.info("before any span %s", marker)
with trace.get_tracer("test").start_as_current_span("work") as span:
    log.warning("inside the span %s", marker, extra={"box": "orders"})
logging.getLogger("opentelemetry.exporter.test").warning("exporter noise %s", marker)
context = span.get_span_context()
print(format(context.trace_id, "032x"), format(context.span_id, "016x"))
"""


@asynccontextmanager
async def otlp_endpoint() -> AsyncIterator[tuple[str, list[tuple[str, bytes]]]]:
    """An OTLP/HTTP receiver on 127.0.0.1: records (path, decompressed body), answers 200."""
    received: list[tuple[str, bytes]] = []
    answer = ExportLogsServiceResponse().SerializeToString()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode()
                path = head.split(" ", 2)[1]
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (line.partition(":") for line in head.split("\r\n")[1:])
                    if k
                }
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                encoding = headers.get("content-encoding", "")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                received.append((path, body))
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\n"
                    + f"Content-Length: {len(answer)}\r\n\r\n".encode()
                    + answer
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", received
    finally:
        server.close()
        await server.wait_closed()


def attribute(attributes: list[KeyValue], key: str) -> str | None:
    for kv in attributes:
        if kv.key == key:
            return str(kv.value.string_value)
    return None


def log_records(received: list[tuple[str, bytes]]) -> dict[str, tuple[str, LogRecord]]:
    """body -> (service.name, record) of every record received on /v1/logs (traces and
    metrics go to their own paths)."""
    found: dict[str, tuple[str, LogRecord]] = {}
    paths = {path for path, _ in received}
    assert "/v1/logs" in paths, paths
    for path, body in received:
        if path != "/v1/logs":
            continue
        request = ExportLogsServiceRequest.FromString(body)
        for resource_logs in request.resource_logs:
            service = attribute(list(resource_logs.resource.attributes), "service.name") or ""
            for scope_logs in resource_logs.scope_logs:
                for record in scope_logs.log_records:
                    found[record.body.string_value] = (service, record)
    return found


async def test_the_services_log_records_arrive_over_otlp_with_their_trace(
    tmp_path: Path,
) -> None:
    marker = uuid.uuid4().hex
    async with otlp_endpoint() as (url, received):
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("OTEL_") or k == "OTEL_SERVICE_NAME"
        }
        env.update(
            DATABASE_URL="postgresql+asyncpg://user:pw@127.0.0.1:1/none",
            KAFKA_BOOTSTRAP_SERVERS="127.0.0.1:1",
            OTEL_EXPORTER_OTLP_ENDPOINT=url,
            OTEL_SERVICE_NAME="otlp-logs-test",
            OTEL_METRIC_EXPORT_INTERVAL="600000",
        )
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            SERVICE,
            marker,
            cwd=tmp_path,  # no .env of the project's here
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        # The process exports its batch when it exits (the SDK flushes at exit).
        out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    assert "Traceback" not in err.decode(), err.decode()  # e.g. from a handler at exit
    trace_id, span_id = out.decode().split()
    records = log_records(received)
    inside = records.get(f"inside the span {marker}")
    assert inside is not None, sorted(records)
    service, record = inside
    assert service == "otlp-logs-test"
    assert record.trace_id.hex() == trace_id
    assert record.span_id.hex() == span_id
    assert record.severity_text == "WARN"
    assert attribute(list(record.attributes), "box") == "orders"
    _, before = records[f"before any span {marker}"]
    assert before.trace_id == b""
    # The exporter's own records stay local (on stderr), never in the export.
    assert f"exporter noise {marker}" not in records
    assert f"exporter noise {marker}" in err.decode()
    # stderr keeps its JSON lines, with the trace id on the one logged in the span.
    assert f'"trace_id": "{trace_id}"' in err.decode()


@pytest.mark.parametrize(
    ("disabled", "endpoint", "exporter"),
    [(True, "http://127.0.0.1:9/", ""), (False, None, ""), (False, "http://127.0.0.1:9/", "none")],
    ids=["sdk-disabled", "no-endpoint", "logs-exporter-none"],
)
def test_no_export_without_an_endpoint_or_with_the_sdk_disabled(
    container: Container,
    monkeypatch: pytest.MonkeyPatch,
    disabled: bool,
    endpoint: str | None,
    exporter: str,
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", raising=False)
    monkeypatch.setenv("OTEL_LOGS_EXPORTER", exporter)
    settings = container.settings().model_copy(
        update={"otel_sdk_disabled": disabled, "otel_exporter_otlp_endpoint": endpoint}
    )
    handlers = list(logging.getLogger().handlers)
    assert export_logs(settings, Resource.create({})) is None
    assert logging.getLogger().handlers == handlers


async def test_an_export_attaches_one_handler_and_detaches_it(
    container: Container,
) -> None:
    async with otlp_endpoint() as (url, received):
        settings = container.settings().model_copy(
            update={"otel_sdk_disabled": False, "otel_exporter_otlp_endpoint": url + "/"}
        )
        before = list(logging.getLogger().handlers)
        export = export_logs(settings, Resource.create({"service.name": "in-process"}))
        assert export is not None
        try:
            assert logging.getLogger().handlers == [*before, export.handler]
            logging.getLogger("otlp.test").warning("one line")
            assert await asyncio.to_thread(export.flush)
        finally:
            await asyncio.to_thread(export.close)
        assert logging.getLogger().handlers == before
    records = log_records(received)  # the endpoint's trailing slash is not doubled
    assert records["one line"][0] == "in-process"
