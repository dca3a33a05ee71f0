"""The asyncpg connections of the hot statements: kept, replaced when dead, errors sorted."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.store.pgconn import (
    DriverConnections,
    asyncpg_sql,
    is_data_error,
    is_unavailable,
)


def test_named_parameters_become_numbered_in_the_order_given() -> None:
    sql = asyncpg_sql("SELECT :b, :a, :ab, :a", "a", "b", "ab")
    assert sql == "SELECT $2, $1, $3, $1"


async def test_a_kept_connection_is_reused_and_a_dead_one_replaced(container: Container) -> None:
    connections = DriverConnections(container.engine(), keep=True)
    try:
        async with connections.acquire() as conn:
            first = await conn.fetchval("SELECT pg_backend_pid()")
        async with connections.acquire() as conn:
            assert await conn.fetchval("SELECT pg_backend_pid()") == first
        async with container.engine().connect() as other:
            raw = (await other.get_raw_connection()).driver_connection
            assert raw is not None
            assert await raw.fetchval("SELECT pg_terminate_backend($1)", first) is True
        await asyncio.sleep(0.5)  # the server closes the socket; asyncpg notices it
        async with connections.acquire() as conn:
            second = await conn.fetchval("SELECT pg_backend_pid()")
        assert second != first
    finally:
        await connections.close()


async def test_a_failed_statement_discards_its_connection(container: Container) -> None:
    connections = DriverConnections(container.engine(), keep=True)

    async def divide_by_zero() -> None:
        async with connections.acquire() as conn:
            await conn.execute("SELECT 1/0")

    try:
        async with connections.acquire() as conn:
            first = await conn.fetchval("SELECT pg_backend_pid()")
        with pytest.raises(asyncpg.PostgresError):
            await divide_by_zero()  # on the kept connection, which is then dropped
        async with connections.acquire() as conn:
            assert await conn.fetchval("SELECT pg_backend_pid()") != first
    finally:
        await connections.close()


async def test_refused_data_and_unavailable_databases_are_told_apart(
    container: Container,
) -> None:
    async def error_of(sql: str) -> BaseException:
        connections = DriverConnections(container.engine())
        try:
            async with connections.acquire() as conn:
                await conn.execute(sql)
        except Exception as exc:
            return exc
        raise AssertionError(f"{sql} did not fail")

    division = await error_of("SELECT 1/0")  # 22012: the data
    too_long = await error_of("SELECT CAST(repeat('x', 300) AS char(1))::int")  # 22P02
    disk_full = await error_of(
        "DO $$ BEGIN RAISE EXCEPTION 'no space' USING ERRCODE = 'disk_full'; END $$"
    )
    shutdown = await error_of(
        "DO $$ BEGIN RAISE EXCEPTION 'bye' USING ERRCODE = 'admin_shutdown'; END $$"
    )
    assert [is_data_error(e) for e in (division, too_long, disk_full, shutdown)] == [
        True,
        True,
        False,
        False,
    ]
    assert [is_unavailable(e) for e in (division, too_long, disk_full, shutdown)] == [
        False,
        False,
        True,
        True,
    ]
    assert is_unavailable(ConnectionResetError()) is True
    # What asyncpg raised on a kept connection right after the server terminated it in the
    # middle of an operation (the guarantees suite's conn-killed scenario): retried on a new
    # connection, not a crash of the consumer.
    protocol = asyncpg.InternalClientError(
        "cannot switch to state 12; another operation (2) is in progress"
    )
    assert is_unavailable(protocol) is True
    assert is_unavailable(ValueError("a bug")) is False


@pytest.mark.parametrize("keep", [True, False])
async def test_session_settings_hold_while_handed_out_and_are_reset_on_return(
    container: Container, keep: bool
) -> None:
    engine = create_async_engine(container.settings().database_url, pool_size=1, max_overflow=0)
    connections = DriverConnections(
        engine, keep=keep, settings={"enable_seqscan": "off", "work_mem": "7MB"}
    )

    async def session_values(raw: Any) -> tuple[str, str]:
        return await raw.fetchval("SHOW enable_seqscan"), await raw.fetchval("SHOW work_mem")

    try:
        async with engine.connect() as first:
            raw = (await first.get_raw_connection()).driver_connection
            assert raw is not None
            pid = await raw.fetchval("SELECT pg_backend_pid()")
            server_defaults = await session_values(raw)
        assert server_defaults != ("off", "7MB")
        async with connections.acquire() as conn:
            assert await conn.fetchval("SELECT pg_backend_pid()") == pid
            assert await conn.fetchval("SHOW enable_seqscan") == "off"
            assert await conn.fetchval("SHOW work_mem") == "7MB"
        await connections.close()
        # The same server session (a pool of one), back in the pool: as it was handed out.
        async with engine.connect() as other:
            raw = (await other.get_raw_connection()).driver_connection
            assert raw is not None
            assert await raw.fetchval("SELECT pg_backend_pid()") == pid
            assert await session_values(raw) == server_defaults
    finally:
        await engine.dispose()


def test_a_setting_name_that_is_not_one_is_refused(container: Container) -> None:
    with pytest.raises(ValueError, match="not a setting name"):
        DriverConnections(container.engine(), settings={"work_mem; DROP TABLE x": "1"})
