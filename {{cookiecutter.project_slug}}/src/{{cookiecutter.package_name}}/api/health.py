"""Liveness and readiness."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from sqlalchemy import text

from ..container import Container
from . import deps

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the process serves requests."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(container: Annotated[Container, Depends(deps.container)]) -> JSONResponse:
    """Readiness: PostgreSQL and Kafka both answer."""
    checks: dict[str, Any] = {}

    async def database() -> None:
        async with container.engine().connect() as conn:
            await conn.execute(text("SELECT 1"))

    for name, check in (("database", database), ("kafka", container.producer().check)):
        try:
            await asyncio.wait_for(check(), 5.0)
            checks[name] = "ok"
        except Exception as exc:
            checks[name] = f"error: {type(exc).__name__}: {exc}"
    ready = all(value == "ok" for value in checks.values())
    return JSONResponse(
        {"status": "ready" if ready else "not ready", "checks": checks}, 200 if ready else 503
    )
