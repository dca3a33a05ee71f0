"""Small database helpers of the scenarios, faults and audit: a scalar, a count, and a
wait that asks again while the database is down during a fault."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import func, select

from {{ cookiecutter.package_name }}.container import Container


async def scalar(container: Container, query: Any) -> int:
    async with container.session_factory()() as session:
        return int((await session.execute(query)).scalar_one() or 0)


async def count(container: Container, model: Any, *where: Any) -> int:
    query = select(func.count()).select_from(model)
    for clause in where:
        query = query.where(clause)
    return await scalar(container, query)


async def wait_until(
    check: Callable[[], Awaitable[bool]], within: float, interval: float = 0.3
) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if await check():
                return True
        except Exception:  # the database may be down during the fault; ask again
            pass
        await asyncio.sleep(interval)
    return False
