"""FastAPI dependencies that read from the app's container.

`container_of` is the plain function for code that has the request; the dependencies are
`async def` because FastAPI runs a plain `def` dependency in its thread pool, a thread hop
per request (~4% of a POST /orders' CPU before, and the GIL handed back and forth)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import cast

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncSession

from outbox_engine.creation.items import Outbox

from ..container import Container


def container_of(request: Request) -> Container:
    return cast(Container, request.app.state.container)


async def container(request: Request) -> Container:
    return container_of(request)


async def session(request: Request) -> AsyncIterator[AsyncSession]:
    async with container_of(request).session_factory()() as db_session:
        yield db_session


async def outbox(request: Request) -> Outbox:
    return container_of(request).outbox()
