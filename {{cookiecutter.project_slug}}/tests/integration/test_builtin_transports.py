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
from {{ cookiecutter.package_name }}.messaging.builtin_transports import HttpWebhookTransport, LogTransport
from {{ cookiecutter.package_name }}.messaging.status import ItemStatus

from ..support import OutboxItem, make_registry, running_worker, transport, wait_for


@asynccontextmanager
async def webhook_server(
    statuses: dict[str, int],
) -> AsyncIterator[tuple[int, list[tuple[str, bytes]]]]:
    """A local HTTP server answering by event name; records (idempotency key, body)."""
    received: list[tuple[str, bytes]] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        headers = {
            k.strip().lower(): v.strip()
            for k, _, v in (line.partition(":") for line in head.split("\r\n")[1:])
            if k
        }
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        received.append((headers["idempotency-key"], body))
        status = statuses.get(headers.get("x-event-name", ""), 200)
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield port, received
    finally:
        server.close()
        await server.wait_closed()


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
    async with webhook_server({"refused": 422, "broken": 503}) as (port, received):
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
    with caplog.at_level(logging.WARNING, logger="{{ cookiecutter.package_name }}.messaging.builtin_transports"):
        async with running_worker(container, registry):
            await wait_for(lambda: _finished(container, 1), within=20)
    records = [r for r in caplog.records if r.name.endswith("builtin_transports")]
    assert len(records) == 1
    assert "secret_event" in records[0].getMessage()
    assert '"n"' not in records[0].getMessage()
    assert not hasattr(records[0], "payload")
