"""The pool's check of a connection when it is taken (store/pool_ping.py), on the service's
own engine (db.create_engine): one `SELECT 1` for a pooled connection, nothing for a new
one, connections the server terminated replaced before the caller sees them, and
connections whose network path went silent replaced within the ping's timeout."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from {{ cookiecutter.package_name }}.container import Container
from {{ cookiecutter.package_name }}.db import create_engine
from outbox_engine.store import pool_ping

from ..silent_proxy import SilentProxy


@dataclass
class Sent:
    query: str
    failed: bool


class QueryLog:
    """Every query each connection of `engine` sends, from its first (asyncpg's query
    logger, added when the pool makes the connection; it sees simple-protocol queries and
    `fetch*` calls, not the statements SQLAlchemy runs as prepared statements)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.sent: list[Sent] = []
        self.made = 0
        self.invalidated: list[BaseException | None] = []
        event.listen(engine.sync_engine, "connect", self._made)
        event.listen(engine.sync_engine, "invalidate", self._invalidated)

    def _made(self, dbapi_connection: Any, record: Any) -> None:
        self.made += 1
        dbapi_connection.driver_connection.add_query_logger(
            lambda q: self.sent.append(Sent(q.query, q.exception is not None))
        )

    def _invalidated(self, dbapi_connection: Any, record: Any, error: BaseException | None) -> None:
        self.invalidated.append(error)

    def queries(self) -> list[str]:
        return [s.query for s in self.sent]

    def clear(self) -> None:
        self.sent.clear()


@contextlib.asynccontextmanager
async def pooled(container: Container, size: int) -> AsyncIterator[tuple[AsyncEngine, QueryLog]]:
    """The service's engine with a pool of `size`, its queries logged; disposed after."""
    engine = create_engine(container.settings().database_url, pool_size=size)
    try:
        yield engine, QueryLog(engine)
    finally:
        await engine.dispose()


async def backend_pid(conn: AsyncConnection) -> int:
    pid: int = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()
    return pid


async def terminate(container: Container, *pids: int) -> None:
    async with container.engine().connect() as admin:
        for pid in pids:
            done = await admin.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
            assert done.scalar_one() is True
    await asyncio.sleep(0.5)  # the server closes the sockets; asyncpg notices


async def test_a_pooled_connection_is_checked_with_one_statement_and_a_new_one_not(
    container: Container,
) -> None:
    async with pooled(container, 1) as (engine, log):
        for _ in range(4):
            async with engine.connect() as conn:
                driver = (await conn.get_raw_connection()).driver_connection
                assert driver is not None
                await driver.execute("SELECT 2")
        # One connection all along. Its first use is as a new connection: no check; each
        # later check-out sends one SELECT 1 and nothing else (pool_pre_ping would send
        # BEGIN, a prepared ';' and ROLLBACK).
        assert log.made == 1
        assert log.queries() == ["SELECT 2"] + [pool_ping.PING, "SELECT 2"] * 3
        assert not any(s.failed for s in log.sent)


async def test_connections_the_server_terminated_are_replaced_before_use(
    container: Container,
) -> None:
    async with pooled(container, 2) as (engine, log):
        async with engine.connect() as first, engine.connect() as second:
            old = {await backend_pid(first), await backend_pid(second)}
        assert log.made == 2
        await terminate(container, *old)
        log.clear()

        # Both pooled connections are dead. The first check-out pings one of them, finds it
        # gone, and the pool discards it and every connection older than it: the second
        # check-out gets a new connection without pinging the other dead one.
        async with engine.connect() as first, engine.connect() as second:
            new = {await backend_pid(first), await backend_pid(second)}
            assert (await first.execute(text("SELECT 40 + 2"))).scalar_one() == 42
        assert len(new) == 2
        assert not new & old
        assert log.made == 4
        # One check failed (the dead connection it found was discarded with the pool's
        # older ones); the other dead connection was replaced unchecked; no new one checked.
        assert [type(e).__name__ for e in log.invalidated] == ["InvalidatePoolError"]
        assert pool_ping.PING not in log.queries()


async def test_a_transaction_after_the_server_dropped_its_connection_commits(
    container: Container,
) -> None:
    async with pooled(container, 1) as (engine, _):
        async with engine.begin() as conn:
            old = await backend_pid(conn)
        await terminate(container, old)
        async with engine.begin() as conn:
            assert await backend_pid(conn) != old
            assert (await conn.execute(text("SELECT 40 + 2"))).scalar_one() == 42


async def test_an_error_that_is_not_the_database_going_away_is_raised(
    container: Container, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with pooled(container, 1) as (engine, log):
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 2"))
        # A check that the server refuses as bad data (22012) is not a lost connection: it
        # is raised, not retried on new connections.
        monkeypatch.setattr(pool_ping, "PING", "SELECT 1/0")
        with pytest.raises(asyncpg.DivisionByZeroError):
            async with engine.connect():
                pass
        assert log.made == 1
        # The connection whose check failed is discarded; the next check-out makes a new one.
        monkeypatch.setattr(pool_ping, "PING", "SELECT 1")
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT 3"))).scalar_one() == 3
        assert log.made == 2
        assert [s.query for s in log.sent if s.failed] == ["SELECT 1/0"]


async def test_pooled_connections_that_went_silent_are_replaced_within_the_ping_timeout(
    container: Container, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The database's address through a proxy whose open connections can go silent: a ping
    # sent on one of them is swallowed and no answer and no close ever comes back.
    url = make_url(container.settings().database_url)
    proxy = SilentProxy(url.host or "127.0.0.1", url.port or 5432)
    monkeypatch.setattr(pool_ping, "PING_TIMEOUT", 1.0)
    proxied = url.set(host="127.0.0.1", port=proxy.port)
    engine = create_engine(proxied.render_as_string(hide_password=False), pool_size=2)
    log = QueryLog(engine)
    try:
        async with engine.connect() as first, engine.connect() as second:
            old = {await backend_pid(first), await backend_pid(second)}
        assert proxy.silence() == 2
        log.clear()

        # Without the ping's own timeout this check-out waits for the kernel to give up on
        # the socket (minutes); the bound here is 60 s so that a hang fails.
        started = time.monotonic()
        async with asyncio.timeout(60):
            async with engine.connect() as first, engine.connect() as second:
                new = {await backend_pid(first), await backend_pid(second)}
                assert (await second.execute(text("SELECT 40 + 2"))).scalar_one() == 42
        waited = time.monotonic() - started
    finally:
        # The proxy first: disposing the pool closes its connections without a timeout
        # (asyncpg's close), which on a connection still silent would wait as long.
        proxy.close()
        await engine.dispose()

    assert len(new) == 2
    assert not new & old
    assert log.made == 4
    # One ping timed out; its connection was discarded with the pool's older one (each
    # silent one closed within SQLAlchemy's 2 s), and neither new connection was pinged.
    assert [type(e).__name__ for e in log.invalidated] == ["InvalidatePoolError"]
    assert [s.query for s in log.sent if s.failed] == [pool_ping.PING]
    assert proxy.dropped_bytes > 0
    # The 1 s ping, two bounded closes of 2 s each, two new connections: well under the
    # minutes of the unbounded wait; 15 s leaves room for a slow machine.
    assert 1.0 <= waited < 15.0, waited


def test_a_ping_timeout_that_is_not_a_positive_number_is_refused() -> None:
    # Refused when the engine is set up, before any connection is made.
    engine = create_engine("postgresql+asyncpg://u:p@127.0.0.1:1/none", pool_size=1)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="ping timeout must be a positive number"):
            pool_ping.ping_on_checkout(engine, timeout=bad)
