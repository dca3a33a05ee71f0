"""Synchronous flush: deliver what a transaction created right after it commits.

    async with flusher.context(session) as ctx:        # begins and commits the transaction
        session.add(order)
        await outbox.create(session, OrderOutboxItem, ...)
    ctx.outcomes   # {message_id: Outcome("delivered" | "failed" | "pending", error)}

The items are delivered in this process once the transaction has committed, so an API can
tell its caller whether replication succeeded. Whatever is not delivered (a failure, or an
item whose key has older pending items) stays pending for the worker, with its attempt
recorded. A nested `flusher.context(session, flush=False)` defers what it creates to the
worker.

Deadlocks: Sentry warns that a synchronous flush which calls another service that itself
flushes synchronously back can deadlock when both hold locks. Here the flush runs only after
the transaction has committed (no row locks held), takes no bucket lock (it delivers only an
item that heads its key, so the worker's order is not disturbed), and bounds every call by
the box's transport timeout: a cycle of synchronous flushes can be slow, never stuck.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncSession

from .flush_context import OutboxContext, Outcome, current
from .middleware import Middlewares
from .processor import BoxProcessor, Result
from .registry import Box, BoxRegistry
from .resources import Resources


class Flusher:
    def __init__(
        self, registry: BoxRegistry, resources: Resources, middlewares: Middlewares
    ) -> None:
        self._registry = registry
        self._resources = resources
        self._middlewares = middlewares
        self._ready: set[int] = set()

    @asynccontextmanager
    async def context(
        self, session: AsyncSession, *, flush: bool = True
    ) -> AsyncIterator[OutboxContext]:
        ctx = OutboxContext(flush)
        outer = current.get()
        token = current.set(ctx)
        try:
            if outer is not None:
                yield ctx  # nested: the outer context owns the transaction
                return
            if session.in_transaction():
                raise RuntimeError(
                    "outbox context: the session already has a transaction; open the context "
                    "first, it begins and commits the transaction itself"
                )
            async with session.begin():
                yield ctx
        finally:
            current.reset(token)
        if flush and ctx.created:
            ctx.outcomes = await self.flush(ctx.created)

    async def flush(self, created: list[tuple[Box, UUID]]) -> dict[UUID, Outcome]:
        by_box: dict[str, list[UUID]] = {}
        for box, message_id in created:
            by_box.setdefault(box.name, []).append(message_id)
        outcomes: dict[UUID, Outcome] = {}
        for name, ids in by_box.items():
            box = self._registry.get(name)
            await self._setup(box)
            processor = BoxProcessor(
                box,
                self._resources.engine,
                self._resources.session_factory,
                self._middlewares,
                self._resources.observer,
            )
            slots = await processor.process_ids(ids)
            for message_id in ids:
                slot = slots.get(message_id)
                if slot is None:
                    outcomes[message_id] = Outcome(
                        "pending", "left to the worker: older items of its key are pending"
                    )
                elif slot.result is Result.DELIVERED:
                    outcomes[message_id] = Outcome("delivered")
                elif slot.result is Result.DISCARDED:
                    outcomes[message_id] = Outcome("discarded", slot.error)
                elif slot.result in (Result.FAILED, Result.PERMANENT):
                    outcomes[message_id] = Outcome("failed", slot.error)
                else:
                    outcomes[message_id] = Outcome("pending", slot.error or slot.result.value)
        return outcomes

    async def _setup(self, box: Box) -> None:
        for bound in box.transports:
            if id(bound.transport) not in self._ready:
                await bound.transport.setup(self._resources)
                self._ready.add(id(bound.transport))
