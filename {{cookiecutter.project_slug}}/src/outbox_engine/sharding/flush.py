"""Synchronous flush: deliver what a transaction created right after it commits.

    async with flusher.context(session) as ctx:        # begins and commits the transaction
        session.add(order)
        await outbox.create(session, OrderOutboxItem, ...)
    ctx.outcomes   # {message_id: Outcome}: .status "delivered" | "failed" | "pending" |
                   # "discarded", .error, .decision (relay/outcomes.py)

Once the transaction has committed, the flush makes sure each item is delivered by the one
process allowed to deliver it, and waits for the outcome, so an API can tell its caller
whether replication succeeded:

* a bucket that a worker owns (the usual case) stays the worker's: the commit's NOTIFY
  already woke it, and the flush waits for the item's status to change (at most the box's
  transport timeout, capped at `MAX_WAIT_SECONDS`);
* a bucket no worker owns (none running, or between owners) is taken by the flush itself
  for the moment of the delivery: the same advisory lock a worker holds, so no worker
  delivers it at the same time, released right after (with a NOTIFY for the workers).

Either way strict order, pauses (box, bucket, key) and fencing hold as in the worker: the
flush delivers an item only if it heads its key (no older item of its key pending or, in a
strict box, failed), never while it is paused, and records through the same fenced
statements. Whatever is not delivered stays pending for the worker with its attempt
recorded. A nested `flusher.context(session, flush=False)` defers what it creates to the
worker.

Deadlocks: Sentry warns that a synchronous flush which calls another service that itself
flushes synchronously back can deadlock when both hold locks. Here the flush runs only after
the transaction has committed (no row locks held), only tries bucket locks (never waits for
one), and bounds every wait by the box's transport timeout: a cycle of synchronous flushes
can be slow, never stuck.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncSession

from outbox_engine.config.registry import Box, BoxRegistry
from outbox_engine.middleware import Middlewares
from outbox_engine.relay.outcomes import Outcome, from_row, pending
from outbox_engine.relay.processor import BoxProcessor
from outbox_engine.sharding.flush_context import OutboxContext, current
from outbox_engine.store.items import buckets_of, states_of
from outbox_engine.store.ownership import NOTIFY_REBALANCE, try_lock_bucket, unlock_bucket
from outbox_engine.store.pauses import PauseReader
from outbox_engine.transports.resources import Resources

# The longest a flush waits for the worker that owns an item's bucket.
MAX_WAIT_SECONDS = 10.0
BEHIND = "left to the worker: an older item of its key is pending or failed"
WAITED = "left to the worker that owns its bucket (not delivered yet)"


class Flusher:
    def __init__(
        self, registry: BoxRegistry, resources: Resources, middlewares: Middlewares
    ) -> None:
        self._registry = registry
        self._resources = resources
        self._middlewares = middlewares
        self._ready: set[int] = set()
        self._pauses = PauseReader(resources.engine)

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
            outcomes.update(await self._flush_box(self._registry.get(name), ids))
        return outcomes

    async def _flush_box(self, box: Box, ids: list[UUID]) -> dict[UUID, Outcome]:
        pauses = await self._pauses.current()
        if pauses.box_paused(box.name):
            return {i: pending(f"box {box.name} is paused") for i in ids}
        paused_buckets = pauses.paused_buckets(box.name)
        outcomes: dict[UUID, Outcome] = {}
        ns = box.lock_namespace
        async with self._resources.engine.connect() as conn:
            driver: Any = (await conn.get_raw_connection()).driver_connection
            buckets = await buckets_of(driver, box.table_name, ids)
            mine: set[int] = set()
            try:
                for bucket in sorted(set(buckets.values()) - paused_buckets):
                    if await try_lock_bucket(driver, ns, bucket):
                        mine.add(bucket)
                for message_id in ids:
                    if buckets.get(message_id) in paused_buckets:
                        outcomes[message_id] = pending("its bucket is paused")
                own = [i for i in ids if buckets.get(i) in mine]
                if own:
                    outcomes.update(await self._deliver(box, own, pauses.paused_keys(box.name)))
            finally:
                if mine:
                    for bucket in mine:
                        await unlock_bucket(driver, ns, bucket)
                    await driver.execute(NOTIFY_REBALANCE)
                await conn.commit()
        waiting = [i for i in ids if i not in outcomes]
        if waiting:
            outcomes.update(await self._wait_for_owner(box, waiting))
        return outcomes

    async def _deliver(
        self, box: Box, ids: list[UUID], paused_keys: frozenset[str]
    ) -> dict[UUID, Outcome]:
        """Deliver items of buckets this flush holds the lock of, as a worker would."""
        await self._setup(box)
        processor = BoxProcessor(
            box,
            self._resources.engine,
            self._resources.session_factory,
            self._middlewares,
            self._resources.observer,
        )
        done = await processor.process_ids(ids, paused_keys)
        outcomes: dict[UUID, Outcome] = {}
        for message_id in ids:
            outcome = done.get(message_id)
            if outcome is None:
                outcomes[message_id] = pending(BEHIND)
            elif outcome.status == "pending" and not outcome.error:
                # Not attempted (behind its key's undelivered item): say so.
                outcomes[message_id] = pending(outcome.decision.value)
            else:
                outcomes[message_id] = outcome
        return outcomes

    async def _wait_for_owner(self, box: Box, ids: list[UUID]) -> dict[UUID, Outcome]:
        """The bucket's owner delivers: wait until each item's status changes (or it failed
        an attempt), at most the box's transport timeout."""
        deadline = time.monotonic() + min(box.config.transport_timeout_seconds, MAX_WAIT_SECONDS)
        outcomes: dict[UUID, Outcome] = {}
        delay = 0.002
        left = list(ids)
        while True:
            rows = await states_of(self._resources.engine, box.table_name, left)
            for message_id, status, errors, error in rows:
                outcome = from_row(status, errors, error)
                if outcome is not None:
                    outcomes[message_id] = outcome
            left = [i for i in left if i not in outcomes]
            if not left or time.monotonic() >= deadline:
                break
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.1)
        for message_id in left:
            outcomes[message_id] = pending(WAITED)
        return outcomes

    async def _setup(self, box: Box) -> None:
        for bound in box.transports:
            if id(bound.transport) not in self._ready:
                await bound.transport.setup(self._resources)
                self._ready.add(id(bound.transport))
