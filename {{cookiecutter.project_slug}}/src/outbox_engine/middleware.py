"""Middleware chains.

Client middlewares wrap item creation (`create` and `create_batch`, told apart by
`call.is_batch`); they may add headers (tracing stores `traceparent` this way) or observe::

    class MyCreateMiddleware:
        async def __call__(self, call: CreateCall, call_next: CreateNext) -> list[UUID]:
            ...before...
            ids = await call_next(call)
            ...after...
            return ids

Server middlewares run in the worker, around each claimed batch and around each item::

    class MyBatchMiddleware:
        async def __call__(self, box: Box, items: Sequence[ItemRecord], call_next: BatchNext) -> None

    class MyItemMiddleware:
        async def __call__(self, box: Box, item: ItemRecord, call_next: ItemNext) -> None

An item middleware sees the item's outcome as an exception raised by `call_next` (success
returns normally); it must re-raise what it does not handle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from outbox_engine.config.registry import Box
    from outbox_engine.transports.base import ItemRecord


@dataclass
class NewItem:
    """One item to create: what the caller gave, plus what the engine computed."""

    event_key: str
    event_name: str
    payload: bytes
    headers: dict[str, Any] = field(default_factory=dict)
    uuid: UUID | None = None
    bucket: int = 0


@dataclass
class CreateCall:
    box: Box
    session: AsyncSession
    items: list[NewItem]
    is_batch: bool


CreateNext = Callable[[CreateCall], Awaitable[list[UUID]]]
BatchNext = Callable[[], Awaitable[None]]
ItemNext = Callable[[], Awaitable[None]]


class CreateMiddleware(Protocol):
    async def __call__(self, call: CreateCall, call_next: CreateNext) -> list[UUID]: ...


class BatchMiddleware(Protocol):
    async def __call__(
        self, box: Box, items: Sequence[ItemRecord], call_next: BatchNext
    ) -> None: ...


class ItemMiddleware(Protocol):
    async def __call__(self, box: Box, item: ItemRecord, call_next: ItemNext) -> None: ...


@dataclass
class Middlewares:
    create: list[CreateMiddleware] = field(default_factory=list)
    batch: list[BatchMiddleware] = field(default_factory=list)
    item: list[ItemMiddleware] = field(default_factory=list)


def wrap_create(middlewares: Sequence[CreateMiddleware], innermost: CreateNext) -> CreateNext:
    handler = innermost
    for middleware in reversed(middlewares):
        handler = _bind_create(middleware, handler)
    return handler


def _bind_create(middleware: CreateMiddleware, call_next: CreateNext) -> CreateNext:
    async def run(call: CreateCall) -> list[UUID]:
        return await middleware(call, call_next)

    return run


async def run_batch_chain(
    middlewares: Sequence[BatchMiddleware],
    box: Box,
    items: Sequence[ItemRecord],
    innermost: BatchNext,
) -> None:
    handler = innermost
    for middleware in reversed(middlewares):
        handler = _bind_batch(middleware, box, items, handler)
    await handler()


def _bind_batch(
    middleware: BatchMiddleware, box: Box, items: Sequence[ItemRecord], call_next: BatchNext
) -> BatchNext:
    async def run() -> None:
        await middleware(box, items, call_next)

    return run


async def run_item_chain(
    middlewares: Sequence[ItemMiddleware], box: Box, item: ItemRecord, innermost: ItemNext
) -> None:
    handler = innermost
    for middleware in reversed(middlewares):
        handler = _bind_item(middleware, box, item, handler)
    await handler()


def _bind_item(
    middleware: ItemMiddleware, box: Box, item: ItemRecord, call_next: ItemNext
) -> ItemNext:
    async def run() -> None:
        await middleware(box, item, call_next)

    return run
