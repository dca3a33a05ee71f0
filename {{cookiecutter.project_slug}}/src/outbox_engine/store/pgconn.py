"""asyncpg connections for the engine's hot statements, taken from the SQLAlchemy pool.

The relay's claim and record and the inbox consumer's insert run thousands of rows per
statement; SQLAlchemy's per-row processing and the pool's pre-ping (three round trips per
check-out) cost more than the statements themselves. `DriverConnections` hands out the
asyncpg connection under a pooled SQLAlchemy connection and, when `keep` is set, keeps it
checked out between uses: a kept connection that the server closed is noticed before use
and replaced, and a connection whose statement failed is never reused.

`settings` are session settings for the connections handed out (set when one is taken from
the pool, reset when it goes back). The relay uses them to keep its claim off sequential
and bitmap scans: a statement prepared once per connection runs on a cached generic plan,
and a plan made while the table looked empty (just created, or vacuumed when empty) scans
the whole table on every claim until the next ANALYZE, which under a steady load can be
minutes, or reads an index as a bitmap, which visits every dead entry (delivered items not
yet vacuumed) again on each claim (relay/processor.py).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

# SQLSTATE classes that mean "this data cannot be stored" (retrying the same rows cannot
# help): data exception, integrity constraint violation, program limit exceeded.
DATA_ERROR_CLASSES = frozenset({"22", "23", "54"})


def is_data_error(exc: BaseException) -> bool:
    """True when the database refused the rows themselves; False when it is unavailable or
    short of resources (connection lost, shutting down, disk full): retry those later."""
    sqlstate = getattr(exc, "sqlstate", None) or getattr(
        getattr(exc, "orig", None), "sqlstate", None
    )
    return isinstance(sqlstate, str) and sqlstate[:2] in DATA_ERROR_CLASSES


def is_unavailable(exc: BaseException) -> bool:
    """True for a database error worth retrying the same work for later: anything the
    server or the connection raised that is not a refusal of the data."""
    # InternalClientError: asyncpg found the connection's protocol in a state it cannot use
    # (seen when the server terminated a connection in the middle of an operation); the
    # connection is discarded (see DriverConnections) and the work retried on a new one.
    database = isinstance(
        exc,
        OSError
        | TimeoutError
        | asyncpg.PostgresError
        | asyncpg.InterfaceError
        | asyncpg.InternalClientError
        | DBAPIError,
    )
    return database and not is_data_error(exc)


def asyncpg_sql(sql: str, *names: str) -> str:
    """`:name` parameters to asyncpg's `$n`, numbered in the order given."""
    for number, name in enumerate(names, start=1):
        sql = re.sub(rf":{name}\b", f"${number}", sql)
    return sql


class DriverConnections:
    def __init__(
        self, engine: AsyncEngine, keep: bool = False, settings: Mapping[str, str] | None = None
    ) -> None:
        self.engine = engine
        self.keep = keep
        self._settings = dict(settings or {})
        if any(not re.fullmatch(r"[a-z_][a-z0-9_.]*", name) for name in self._settings):
            raise ValueError(f"not a setting name: {list(self._settings)!r}")
        # One statement sets them all, one resets them all: a checkout costs two, however
        # many settings there are.
        self._set_sql = "SELECT " + ", ".join(
            f"set_config(${2 * i + 1}, ${2 * i + 2}, false)" for i in range(len(self._settings))
        )
        self._set_args = [part for pair in self._settings.items() for part in pair]
        self._reset_sql = "; ".join(f"RESET {name}" for name in self._settings)
        self._idle: list[tuple[AsyncConnection, Any]] = []
        self._closed = False

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Any]:
        """An asyncpg connection, autocommit unless a transaction is opened on it."""
        conn: AsyncConnection | None = None
        driver: Any = None
        while self._idle:
            held, driver = self._idle.pop()
            if not driver.is_closed():
                conn = held
                break
            await _discard(held)
        if conn is None:
            conn = await self.engine.connect()
            try:
                driver = (await conn.get_raw_connection()).driver_connection
                if self._settings:
                    await driver.fetchval(self._set_sql, *self._set_args)
            except BaseException:
                await _discard(conn)
                raise
        try:
            yield driver
        except BaseException:
            await _discard(conn)
            raise
        if self.keep and not self._closed:
            self._idle.append((conn, driver))
        else:
            await self._release(conn, driver)

    async def close(self) -> None:
        """Return the kept connections to the pool."""
        self._closed = True
        while self._idle:
            conn, driver = self._idle.pop()
            await self._release(conn, driver)

    async def _release(self, conn: AsyncConnection, driver: Any) -> None:
        """Back to the pool, with the session as the pool handed it out."""
        if self._reset_sql:
            try:
                await driver.execute(self._reset_sql)
            except Exception:
                await _discard(conn)
                return
        await conn.close()


async def _discard(conn: AsyncConnection) -> None:
    with contextlib.suppress(Exception):
        await conn.invalidate()
    with contextlib.suppress(Exception):
        await conn.close()
