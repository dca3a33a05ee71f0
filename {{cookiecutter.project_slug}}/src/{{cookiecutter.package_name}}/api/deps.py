"""FastAPI dependencies that read from the app's container."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import cast

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncSession

from outbox_engine.creation.items import Outbox

from ..container import Container


def container(request: Request) -> Container:
    return cast(Container, request.app.state.container)


async def session(request: Request) -> AsyncIterator[AsyncSession]:
    async with container(request).session_factory()() as db_session:
        yield db_session


def outbox(request: Request) -> Outbox:
    return container(request).outbox()
