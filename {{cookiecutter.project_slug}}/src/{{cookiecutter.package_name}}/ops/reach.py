"""One clear line for a PostgreSQL or Kafka that cannot be reached: what, where, what to check.

`describe_outage(exc, database_url=..., kafka_servers=...)` walks the exception's chain
(SQLAlchemy wraps asyncpg's errors, alembic and asyncio re-raise them) and returns the line,
or None when the exception is not about reaching a service (a bug keeps its traceback).
The address is host:port and user, never the password. The CLI prints the line and exits
with `EXIT_UNREACHABLE`.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Iterator

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

# The console script's exit codes (docs/operations.md lists them).
EXIT_OK = 0
EXIT_DECLINED = 1  # the operator answered no (or an unexpected error, with its traceback)
EXIT_USAGE = 2  # bad command line, settings, boxes file or input; --yes missing without a TTY
EXIT_UNREACHABLE = 3  # PostgreSQL or Kafka cannot be reached or refused the login
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT); the resume position is printed

_AUTH = (
    asyncpg.InvalidAuthorizationSpecificationError,  # wrong password, unknown role, pg_hba
    asyncpg.InvalidCatalogNameError,  # the database does not exist
)
_LOST = (
    asyncpg.CannotConnectNowError,  # starting up or shutting down
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.ConnectionFailureError,
    asyncpg.TooManyConnectionsError,
)
_NETWORK_ERRNOS = {
    errno.ECONNREFUSED,
    errno.ECONNRESET,
    errno.EHOSTUNREACH,
    errno.ENETUNREACH,
    errno.ETIMEDOUT,
    errno.EADDRNOTAVAIL,
}


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        orig = getattr(current, "orig", None)  # SQLAlchemy's DBAPIError wraps the driver's
        todo.extend([current.__context__, current.__cause__])
        if isinstance(orig, BaseException):
            todo.append(orig)
        inner = getattr(orig, "__cause__", None)  # asyncpg adapter's error wraps asyncpg's
        if isinstance(inner, BaseException):
            todo.append(inner)


def database_address(database_url: str) -> str:
    """`user@host:port/db` of a URL, without the password."""
    try:
        url = make_url(database_url)
    except ArgumentError:
        return "(malformed DATABASE_URL)"
    user = f"{url.username}@" if url.username else ""
    return f"{user}{url.host or 'localhost'}:{url.port or 5432}/{url.database or ''}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def _postgres(exc: BaseException, where: str) -> str | None:
    if isinstance(exc, _AUTH):
        return (
            f"PostgreSQL at {where} refused the connection: {_first_line(exc)}; "
            "check the user, password and database name in DATABASE_URL"
        )
    if isinstance(exc, _LOST):
        return (
            f"lost or could not open the connection to PostgreSQL at {where}: "
            f"{_first_line(exc)}; check that the server is up and accepts connections"
        )
    if isinstance(exc, socket.gaierror):
        return (
            f"cannot resolve the PostgreSQL host of {where}: {_first_line(exc)}; "
            "check the host name in DATABASE_URL"
        )
    network = isinstance(exc, OSError) and exc.errno in _NETWORK_ERRNOS
    if network or isinstance(exc, (ConnectionError, TimeoutError)):
        code = exc.errno if isinstance(exc, OSError) else None
        reason = os.strerror(code).lower() if code else _first_line(exc)
        return (
            f"cannot reach PostgreSQL at {where}: {reason}; "
            "check DATABASE_URL and that the server is running and reachable from here"
        )
    return None


def _kafka(exc: BaseException, servers: str) -> str | None:
    if type(exc).__name__ != "KafkaException" or not type(exc).__module__.startswith(
        "confluent_kafka"
    ):
        return None
    return (
        f"Kafka at {servers} failed: {_first_line(exc)}; "
        "check KAFKA_BOOTSTRAP_SERVERS (and KAFKA_EXTRA_CONFIG) and that the brokers are up"
    )


def describe_outage(
    exc: BaseException, *, database_url: str | None, kafka_servers: str | None = None
) -> str | None:
    """The one line for a service that cannot be reached, or None (not an outage)."""
    for error in _chain(exc):
        if database_url is not None:
            line = _postgres(error, database_address(database_url))
            if line:
                return line
        if kafka_servers is not None:
            line = _kafka(error, kafka_servers)
            if line:
                return line
    return None
