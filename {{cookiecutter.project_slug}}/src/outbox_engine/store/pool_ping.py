"""A one-statement liveness check of pooled connections, in place of SQLAlchemy's pre-ping.

A connection that sat in the pool may be dead (the server restarted, failed over, or
terminated it); checking it before use is what makes that cost the caller nothing.
SQLAlchemy's `pool_pre_ping` does so on asyncpg with a transaction around its ping (BEGIN,
a prepared `;`, ROLLBACK: three round trips, so that it also works through PgBouncer's
transaction mode) on every check-out. A one-row business transaction is three round trips
of its own (BEGIN, the statement, COMMIT): the ping doubled them.

`ping_on_checkout(engine)` sends one simple-protocol `SELECT 1` instead: one round trip, no
transaction opened, no prepared statement (so PgBouncer's transaction mode is fine too).
Otherwise it behaves as pre-ping does:

- a connection made for this check-out is not pinged;
- a ping that fails because the server or the connection is gone (`is_unavailable`)
  discards that connection and every pooled connection older than it (one dropped
  connection usually means a restart or a failover), and the pool makes a new one, within
  SQLAlchemy's check-out attempts; the caller sees no error unless the new connection
  cannot be made either;
- any other error (a bug, not the database) is raised.

The ping has a timeout of its own (`PING_TIMEOUT`, 5 s; `timeout=` to change it): a
connection whose network path went silent (the server's host gone without a reset, a
failover behind a virtual address, a firewall that dropped its state) answers nothing and
closes nothing, and without one the check-out would wait for the kernel to give up on the
socket, about fifteen minutes on Linux. A ping that times out counts as a lost connection:
the caller waits the timeout, plus at most 2 s for SQLAlchemy's bounded close of each silent
connection the pool discards, and gets a new connection. `SELECT 1` on a live server takes
well under a millisecond, even a loaded one answers it within the timeout; a server that
does not is treated as gone, which costs new connections, not errors.

Create the engine without `pool_pre_ping` (the two together would ping twice). Measured on
the bench machine (the template's bench/notes.md, the `cost` scenario): one-row
transactions through a session, 1.33x as many a second (median of six repeats).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import InvalidatePoolError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

from outbox_engine.store.pgconn import is_unavailable

PING = "SELECT 1"
PING_TIMEOUT = 5.0
# Set on a connection when it is made; its first check-out takes it instead of pinging.
# The pool clears a record's `info` when its connection is discarded.
_NEW = "outbox_engine.new_connection"


def ping_on_checkout(engine: AsyncEngine, timeout: float | None = None) -> None:
    """Check each pooled connection with one `SELECT 1` when it is checked out, waiting at
    most `timeout` seconds for its answer (default `PING_TIMEOUT`)."""
    seconds = PING_TIMEOUT if timeout is None else timeout
    if not seconds > 0:
        raise ValueError(f"ping timeout must be a positive number of seconds, got {timeout!r}")
    pool = engine.sync_engine

    @event.listens_for(pool, "connect")
    def _made(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info[_NEW] = True

    @event.listens_for(pool, "checkout")
    def _ping(
        dbapi_connection: Any, record: ConnectionPoolEntry, proxy: PoolProxiedConnection
    ) -> None:
        if record.info.pop(_NEW, False):
            return
        try:
            dbapi_connection.run_async(lambda driver: driver.execute(PING, timeout=seconds))
        except Exception as exc:
            if is_unavailable(exc):
                raise InvalidatePoolError(f"pooled connection lost: {exc!r}") from exc
            raise
