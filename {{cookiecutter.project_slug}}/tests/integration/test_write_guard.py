"""The write guard when a connection is lost under it (real PostgreSQL): a statement
cancelled by its task, or a connection the server terminates, raises the error that
happened, not the guard's; and no connection keeps the guard's "flushing" mark after it,
so the next bulk write is still refused.

SQLAlchemy invalidates a connection whose statement was cancelled or whose server went
away; rolling back such a transaction fires the engine's `rollback` event, in which the
connection's `info` cannot be read (reading it tries to reconnect inside the failed
transaction: PendingRollbackError). The guard's listener must not read it there.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, PendingRollbackError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.sharding.guard import FLUSHING, UnguardedWriteError, install_write_guard

from ..replicated import Thing, things  # noqa: F401 - fixture

pytestmark = pytest.mark.usefixtures("things")


@pytest.fixture
async def one_connection(container: Container) -> AsyncIterator[AsyncEngine]:
    """An engine of one pooled connection with the guard on: every checkout is that
    connection, so a mark left on it would show on the next one."""
    url = container.engine().url.render_as_string(hide_password=False)
    engine = create_async_engine(url, pool_size=1, max_overflow=0, pool_timeout=5)
    uninstall = install_write_guard(engine.sync_engine)
    try:
        yield engine
    finally:
        uninstall()
        await engine.dispose()


async def _terminate(container: Container, pid: int) -> None:
    async with container.engine().connect() as conn:
        killed = await conn.scalar(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    assert killed is True


async def _works_and_still_guards(engine: AsyncEngine, rows: int = 0) -> None:
    """The one connection is usable again, carries no flushing mark, and the next bulk
    write is refused."""
    async with engine.connect() as conn:
        assert FLUSHING not in conn.info
        assert await conn.scalar(text("SELECT count(*) FROM replicated_things")) == rows
    with pytest.raises(UnguardedWriteError, match="DELETE FROM replicated_things"):
        async with engine.begin() as conn:
            await conn.execute(text("DELETE FROM replicated_things"))


def _is_the_disconnect(error: DBAPIError) -> None:
    assert not isinstance(error, PendingRollbackError)
    assert error.connection_invalidated is True


async def test_a_statement_cancelled_under_the_guard_raises_the_cancellation(
    one_connection: AsyncEngine,
) -> None:
    started = asyncio.Event()

    async def slow() -> None:
        async with one_connection.connect() as conn:
            await conn.execute(text("SELECT 1"))  # inside a transaction from here on
            started.set()
            await conn.execute(text("SELECT pg_sleep(30)"))

    task = asyncio.create_task(slow())
    await asyncio.wait_for(started.wait(), 10)
    await asyncio.sleep(0.3)
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=10)
    assert done == {task}
    assert task.cancelled(), f"expected the cancellation, got {task.exception()!r}"
    await _works_and_still_guards(one_connection)


async def test_a_connection_terminated_mid_transaction_raises_the_disconnect(
    container: Container, one_connection: AsyncEngine
) -> None:

    async def killed_mid_transaction() -> None:
        async with one_connection.begin() as conn:
            pid = await conn.scalar(text("SELECT pg_backend_pid()"))
            await _terminate(container, int(pid))
            await conn.execute(text("SELECT 1"))

    with pytest.raises(DBAPIError) as raised:
        await killed_mid_transaction()
    _is_the_disconnect(raised.value)
    await _works_and_still_guards(one_connection)


async def test_a_flush_that_loses_its_connection_leaves_no_flushing_mark(
    container: Container, one_connection: AsyncEngine
) -> None:
    """The guard marks the connection while the ORM flushes (its own per-row writes are
    allowed); a flush whose connection dies half way must not leave that mark behind, or
    every later bulk write on the connection would pass unguarded."""
    sessions = async_sessionmaker(one_connection, expire_on_commit=False)

    async def killed_before_the_flush() -> None:
        async with sessions() as session, session.begin():
            pid = (await session.execute(text("SELECT pg_backend_pid()"))).scalar_one()
            await _terminate(container, int(pid))
            session.add(Thing(account_id=7, name="lost"))
            await session.flush()

    with pytest.raises(DBAPIError) as raised:
        await killed_before_the_flush()
    _is_the_disconnect(raised.value)
    await _works_and_still_guards(one_connection)
    # And a flush that works still writes through the guard, then clears its mark.
    async with sessions() as session, session.begin():
        session.add(Thing(account_id=7, name="kept"))
    await _works_and_still_guards(one_connection, rows=1)
