"""What a failed attempt leaves behind: the text stored as `last_error` (and logged), and
whether the failure is permanent.

The text names the error and why, never the data. `last_error` is shown by the admin API
even for boxes whose payloads are hidden, and it is logged, so it must not carry what the
payload or the statement carried:

* SQLAlchemy's error string appends the statement (`[SQL: ...]`) and its parameters
  (`[parameters: ...]`), which hold the handler's values;
* PostgreSQL's `DETAIL` repeats the offending row or key (`Key (id)=(42) already exists`),
  and some messages quote the refused value (`invalid input syntax for type integer: "x"`).

So a database error becomes its class, its SQLSTATE and the first line of the server's
message, with quoted values replaced by `"…"` except in integrity errors (class 23, whose
quotes name constraints, tables and columns), cut to `MAX_DATABASE_TEXT` characters. Other
exceptions keep `Class: message`, with anything after a `[SQL:` / `[parameters:` / `DETAIL:`
marker cut off, in case a handler wrapped a database error in its own.

The same holds for errors the driver raises before the statement reaches the server (asyncpg
refusing a parameter it cannot encode quotes the value): driver class and first line,
quoted values replaced.

Permanent: `PermanentFailure`, and database refusals of the data itself (SQLSTATE classes
22 data exception, 23 integrity constraint violation, 54 program limit exceeded: see
pgconn.is_data_error; and the driver's own `DataError`, a parameter it cannot encode).
Retrying such a handler re-runs the same input into the same refusal;
failing it at once frees its key and tells the operator why. Lost connections, shutdowns,
timeouts and full disks stay transient.
"""

from __future__ import annotations

import re

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.exc import DBAPIError, DisconnectionError, PendingRollbackError, StatementError

from outbox_engine.store.pgconn import is_data_error
from outbox_engine.transports.base import PermanentFailure

MAX_ERROR_LENGTH = 2000
MAX_DATABASE_TEXT = 300
# Where a message starts quoting a statement, its parameters or a row.
_LEAKS = re.compile(r"\s*(\[SQL:|\[parameters:|\(Background on this error|DETAIL:|\nDETAIL)")
_QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'")
_CLASS_PREFIX = re.compile(r"^<class '[\w.]+'>:\s*")


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception, what it wraps (`orig`, `driver_exception`) and its causes, in order."""
    seen: list[BaseException] = []
    pending: list[BaseException | None] = [exc]
    while pending and len(seen) < 8:
        current = pending.pop(0)
        if current is None or any(current is s for s in seen):
            continue
        seen.append(current)
        pending += [
            getattr(current, "orig", None),
            getattr(current, "driver_exception", None),
            current.__cause__,
        ]
    return seen


# SQLSTATE classes of failures that trying the same work again can cure: connection
# exceptions, transaction rollbacks (serialization failures, deadlocks), insufficient
# resources, operator intervention (shutdown, terminated backends), system errors.
TRANSIENT_CLASSES = frozenset({"08", "40", "53", "57", "58"})
# Without a SQLSTATE: the connection itself failed, or SQLAlchemy refuses a session whose
# connection was lost until it is rolled back.
_CONNECTION_ERRORS = (
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    DisconnectionError,
    PendingRollbackError,
)


def is_transient(exc: BaseException) -> bool:
    """True when the connection or the server failed, or the transaction lost a conflict:
    the same work may succeed as it is when tried again. False for an error the work itself
    causes every time (a refused row, a trigger's exception, a constraint checked at
    commit, a bug), which must be pinned on an item rather than retried forever."""
    code = sqlstate(exc)
    if code is not None:
        return code[:2] in TRANSIENT_CLASSES
    return any(
        isinstance(c, _CONNECTION_ERRORS)
        or (isinstance(c, DBAPIError) and c.connection_invalidated)
        for c in _chain(exc)
        if not _is_driver_data_error(c)
    )


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a database error anywhere in the exception's chain."""
    for candidate in _chain(exc):
        code = getattr(candidate, "sqlstate", None)
        if isinstance(code, str) and len(code) == 5:
            return code
    return None


def is_permanent(exc: BaseException) -> bool:
    """True when retrying cannot help: fail the item now."""
    if isinstance(exc, PermanentFailure):
        return True
    return any(is_data_error(c) or _is_driver_data_error(c) for c in _chain(exc))


def _is_driver_data_error(exc: BaseException) -> bool:
    """asyncpg's client-side DataError (a parameter it cannot encode): an InterfaceError that
    is also a ValueError. Its class is private; the server's DataError (SQLSTATE 22) is not."""
    return isinstance(exc, asyncpg.InterfaceError) and isinstance(exc, ValueError)


def _is_database_error(exc: BaseException) -> bool:
    return any(
        isinstance(c, StatementError | asyncpg.PostgresError | asyncpg.InterfaceError)
        for c in _chain(exc)
    )


def _driver_error(exc: BaseException, code: str | None) -> BaseException:
    """The most specific error of the chain: the driver's own, which carries the SQLSTATE
    (when there is one) and the plain message."""
    chain = _chain(exc)
    if code is not None:
        chain = [c for c in chain if getattr(c, "sqlstate", None) == code] or chain
    return chain[-1]


def _first_line(text: str) -> str:
    text = _CLASS_PREFIX.sub("", text.strip())
    text = _LEAKS.split(text, maxsplit=1)[0]
    return text.splitlines()[0].strip() if text.strip() else ""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def database_text(exc: BaseException, code: str | None) -> str:
    """`Class (SQLSTATE code): first line of the server's message`, values left out."""
    error = _driver_error(exc, code)
    message = _first_line(str(error))
    if code is None or not code.startswith("23"):
        message = _QUOTED.sub('"…"', message)
    text = type(error).__name__ + (f" (SQLSTATE {code})" if code else "")
    return _cut(f"{text}: {message}" if message else text, MAX_DATABASE_TEXT)


def failure_text(exc: BaseException) -> str:
    """The text stored as `last_error` and logged for a failed attempt."""
    code = sqlstate(exc)
    if code is not None or _is_database_error(exc):
        return database_text(exc, code)
    message = _first_line(str(exc)) if _LEAKS.search(str(exc)) else str(exc).strip()
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return _cut(text, MAX_ERROR_LENGTH)
