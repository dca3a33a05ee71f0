"""Which failures are retried as they are (transient) and which must be pinned on an item."""

from __future__ import annotations

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy.exc import DBAPIError, PendingRollbackError

from outbox_engine.relay.failures import is_transient


def _wrapped(orig: BaseException, invalidated: bool = False) -> DBAPIError:
    return DBAPIError("COMMIT", None, orig, connection_invalidated=invalidated)


@pytest.mark.parametrize(
    "exc",
    [
        ConnectionRefusedError(111, "refused"),
        TimeoutError(),
        _wrapped(asyncpg.ConnectionDoesNotExistError("closed")),  # 08003
        _wrapped(asyncpg.CannotConnectNowError("starting up")),  # 57P03
        _wrapped(asyncpg.AdminShutdownError("terminating")),  # 57P01
        _wrapped(asyncpg.SerializationError("conflict")),  # 40001
        _wrapped(asyncpg.DeadlockDetectedError("deadlock")),  # 40P01
        _wrapped(asyncpg.DiskFullError("full")),  # 53100
        _wrapped(asyncpg.InterfaceError("connection is closed")),
        _wrapped(RuntimeError("gone"), invalidated=True),
        PendingRollbackError("Can't reconnect until invalid transaction is rolled back"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_outages_and_lost_conflicts_are_transient(exc: BaseException) -> None:
    assert is_transient(exc)


@pytest.mark.parametrize(
    "exc",
    [
        _wrapped(asyncpg.UniqueViolationError("duplicate")),  # 23505 at a deferred commit
        _wrapped(asyncpg.RaiseError("refused by a trigger")),  # P0001
        _wrapped(asyncpg.NumericValueOutOfRangeError("overflow")),  # 22003
        _wrapped(asyncpg.UndefinedTableError("no such table")),  # 42P01: a bug, not an outage
        RuntimeError("a handler's bug"),
        ValueError("bad payload"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_what_the_work_itself_causes_is_not_transient(exc: BaseException) -> None:
    assert not is_transient(exc)
