"""The webhook and log transports through the real relay."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from sqlalchemy import select

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.store.status import ItemStatus
from outbox_engine.transports.builtin import HttpWebhookTransport, LogTransport

from ..support import OutboxItem, make_registry, running_worker, transport, wait_for

# One received request's header lines, in order: (lower-case name, value).
HeaderLines = list[tuple[str, str]]


@asynccontextmanager
async def webhook_server(
    statuses: dict[str, int],
) -> AsyncIterator[tuple[int, list[tuple[str, bytes]], list[HeaderLines]]]:
    """A local HTTP server answering by event name; records (idempotency key, body) and
    every request's header lines."""
    received: list[tuple[str, bytes]] = []
    heads: list[HeaderLines] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        lines = [
            (k.strip().lower(), v.strip())
            for k, _, v in (line.partition(":") for line in head.split("\r\n")[1:])
            if k
        ]
        headers = dict(lines)
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        received.append((headers["idempotency-key"], body))
        heads.append(lines)
        status = statuses.get(headers.get("x-event-name", ""), 200)
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield port, received, heads
    finally:
        server.close()
        await server.wait_closed()


def values(lines: HeaderLines, name: str) -> list[str]:
    """Every value sent under `name` (a header sent twice shows twice)."""
    return [v for k, v in lines if k == name]


async def create(container: Container, events: list[str]) -> None:
    async with container.session_factory()() as session, session.begin():
        await container.outbox().create_batch(
            session,
            OutboxItem,
            [
                {"event_key": str(i), "event_name": e, "payload": {"n": i}}
                for i, e in enumerate(events)
            ],
        )


async def rows(container: Container) -> dict[str, tuple[int, int, str | None]]:
    async with container.session_factory()() as session:
        result = await session.execute(
            select(
                OutboxItem.event_name,
                OutboxItem.status,
                OutboxItem.errors_count,
                OutboxItem.last_error,
            )
        )
        return {r.event_name: (r.status, r.errors_count, r.last_error) for r in result}


async def _finished(container: Container, expected: int) -> bool:
    return (
        sum(1 for s, _, _ in (await rows(container)).values() if s != ItemStatus.PENDING)
        >= expected
    )


async def test_webhook_outcomes_follow_http_status(container: Container) -> None:
    async with webhook_server({"refused": 422, "broken": 503}) as (port, received, _):
        registry = make_registry(
            outbox={
                "transports": [
                    transport(HttpWebhookTransport, url=f"http://127.0.0.1:{port}/hook")
                ],
                "max_retries": 0,
            }
        )
        await create(container, ["fine", "refused", "broken"])
        async with running_worker(container, registry):
            await wait_for(lambda: _finished(container, 3), within=20)
    state = await rows(container)
    assert state["fine"] == (ItemStatus.DELIVERED, 0, None)
    assert state["refused"] == (
        ItemStatus.FAILED,
        1,
        f"PermanentFailure: webhook http://127.0.0.1:{port}/hook: HTTP 422",
    )
    assert state["broken"] == (
        ItemStatus.FAILED,
        1,
        f"RuntimeError: webhook http://127.0.0.1:{port}/hook: HTTP 503",
    )
    assert len(received) == 3
    assert all(len(key) == 36 for key, _ in received)  # the message id as Idempotency-Key


async def test_the_webhook_keeps_a_configured_content_type_and_defaults_it(
    container: Container,
) -> None:
    async with webhook_server({}) as (port, _, heads):
        url = f"http://127.0.0.1:{port}/hook"
        cloud = transport(
            HttpWebhookTransport,
            url=url,
            headers={"content-TYPE": "application/cloudevents+json", "X-Tenant": "t-1"},
        )
        plain = transport(HttpWebhookTransport, url=url)
        cloud["event_name"], plain["event_name"] = "cloud", "plain"
        registry = make_registry(outbox={"transports": [cloud, plain]})
        await create(container, ["cloud", "plain"])
        async with running_worker(container, registry):
            await wait_for(lambda: _finished(container, 2), within=20)
    assert len(heads) == 2
    by_event = {values(lines, "x-event-name")[0]: lines for lines in heads}
    assert values(by_event["cloud"], "content-type") == ["application/cloudevents+json"]
    assert values(by_event["cloud"], "x-tenant") == ["t-1"]
    assert values(by_event["plain"], "content-type") == ["application/json"]
    assert values(by_event["plain"], "x-tenant") == []
{%- if not cookiecutter.opentelemetry %}


async def test_the_webhook_sends_the_items_trace_context(container: Container) -> None:
    """Without OpenTelemetry in this service, the trace context an item was created with
    (e.g. by an upstream service's trace) still reaches the receiver, unchanged."""
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with webhook_server({}) as (port, _, heads):
        url = f"http://127.0.0.1:{port}/hook"
        registry = make_registry(outbox={"transports": [transport(HttpWebhookTransport, url=url)]})
        async with container.session_factory()() as session, session.begin():
            await container.outbox().create(
                session,
                OutboxItem,
                event_key="1",
                event_name="traced",
                payload={},
                headers={"traceparent": traceparent, "tracestate": "vendor=1"},
            )
        async with running_worker(container, registry):
            await wait_for(lambda: _finished(container, 1), within=20)
    assert len(heads) == 1
    assert values(heads[0], "traceparent") == [traceparent]
    assert values(heads[0], "tracestate") == ["vendor=1"]
{%- endif %}


async def test_an_unreachable_webhook_consumes_no_retry(container: Container) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once the socket closes
    registry = make_registry(
        outbox={
            "transports": [transport(HttpWebhookTransport, url=f"http://127.0.0.1:{port}/hook")],
            "max_retries": 0,
        }
    )
    await create(container, ["fine"])
    async with running_worker(container, registry):
        await asyncio.sleep(1.5)
        assert await rows(container) == {"fine": (ItemStatus.PENDING, 0, None)}


async def test_the_log_transport_logs_ids_but_not_payloads(
    container: Container, caplog: pytest.LogCaptureFixture
) -> None:
    registry = make_registry(outbox={"transports": [transport(LogTransport, level="WARNING")]})
    await create(container, ["secret_event"])
    with caplog.at_level(logging.WARNING, logger="outbox_engine.transports.builtin"):
        async with running_worker(container, registry):
            await wait_for(lambda: _finished(container, 1), within=20)
    records = [r for r in caplog.records if r.name == "outbox_engine.transports.builtin"]
    assert len(records) == 1
    assert "secret_event" in records[0].getMessage()
    assert '"n"' not in records[0].getMessage()
    assert not hasattr(records[0], "payload")
