"""Database refusals as clear 503 answers instead of a bare 500.

When PostgreSQL cannot take a write (disk full, out of memory or connections: SQLSTATE class
53), is restarting (class 57) or cannot be reached (class 08, refused connections), the
request's transaction rolled back and nothing it would have written exists, outbox items
included. The client learns exactly that and when to try again.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5


def sqlstate(exc: DBAPIError) -> str | None:
    """The SQLSTATE of the driver's error, if it has one."""
    for candidate in (exc.orig, getattr(exc.orig, "__cause__", None)):
        code = getattr(candidate, "sqlstate", None)
        if isinstance(code, str):
            return code
    return None


def describe(exc: DBAPIError) -> str | None:
    """What to tell the client, or None for errors that are not the database's capacity or
    availability (those stay 500s)."""
    code = sqlstate(exc)
    if code == "53100":
        return "the database is out of disk space (SQLSTATE 53100 disk_full)"
    if code is not None and code.startswith("53"):
        return f"the database is out of resources (SQLSTATE {code})"
    if code is not None and code.startswith("57"):
        return f"the database is shutting down or starting up (SQLSTATE {code})"
    if exc.connection_invalidated or (code is not None and code.startswith("08")):
        return "the database connection was lost"
    return None


def _unavailable(reason: str) -> JSONResponse:
    log.warning("request rolled back: %s", reason)
    return JSONResponse(
        {"detail": f"{reason}; nothing was saved, retry later"},
        status_code=503,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


def install(app: FastAPI) -> None:
    @app.exception_handler(DBAPIError)
    async def database_refused(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, DBAPIError)
        reason = describe(exc)
        if reason is None:
            raise exc
        return _unavailable(reason)

    @app.exception_handler(ConnectionError)
    async def database_unreachable(_request: Request, exc: Exception) -> JSONResponse:
        # asyncpg raises these unwrapped when it cannot open a connection (refused, reset).
        return _unavailable(f"the database cannot be reached ({type(exc).__name__})")
