"""The inbox's strategy: a batch's handlers in one transaction, each item in a savepoint.

A handler's writes and its item's status change commit together (effectively once); a
failing handler rolls back only its savepoint. One commit per batch instead of one per item
is what makes the inbox fast. Handlers run only on rows locked here and found as claimed
(pending, same attempt count): two workers can never both apply one item; a row that is
not is fenced (counted, its key waits). If the batch transaction itself fails, nothing of it
committed: an outage leaves every item pending; any other refusal (a constraint checked at
commit, a trigger) runs the items again one per transaction, so it lands on the item that
causes it as a failed attempt that retries and backoff bound.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from outbox_engine.creation.chain import handling
from outbox_engine.creation.items import pending_created
from outbox_engine.inbox.consumer import REJECTED_HEADER
from outbox_engine.middleware import run_item_chain
from outbox_engine.relay.batch import Slot, check, error_text
from outbox_engine.relay.outcomes import DEFERRED, DELIVERED, Decision
from outbox_engine.relay.strategies.base import DeliveryContext, fail
from outbox_engine.store.record import InboxRecorder
from outbox_engine.transports.base import InboxHandler

log = logging.getLogger(__name__)


class InboxDelivery:
    rejected_header: str | None = REJECTED_HEADER

    def __init__(
        self,
        ctx: DeliveryContext,
        session_factory: async_sessionmaker[AsyncSession],
        fenced: Callable[[int, str], None],
    ) -> None:
        self.ctx = ctx
        self.session_factory = session_factory
        self.recorder = InboxRecorder(ctx.box.table_name)
        self._fenced = fenced

    async def deliver(self, slots: list[Slot]) -> None:
        ctx = self.ctx
        handled: list[Slot] = []
        failed_keys: set[str] = set()
        fenced = 0
        try:
            async with self.session_factory() as session, session.begin():
                locked = await self.recorder.lock(session, [s.item.id for s in slots])
                for slot in slots:
                    if slot.item.event_key in failed_keys:
                        continue  # keep the key's order: the rest waits for the next batch
                    if locked.get(slot.item.id) != slot.item.errors_count:
                        fenced += 1
                        failed_keys.add(slot.item.event_key)
                        continue
                    created = pending_created(session)
                    created_before = len(created)
                    slot.start(ctx.observer, ctx.box)
                    try:
                        assert slot.scope is not None
                        with slot.scope:
                            await run_item_chain(
                                ctx.middlewares.item,
                                ctx.box,
                                slot.item,
                                functools.partial(self._handle, slot, session),
                            )
                    except Exception as exc:
                        del created[created_before:]  # rolled back with the savepoint
                        fail(ctx, slot, exc)
                        slot.finish(exc)
                        failed_keys.add(slot.item.event_key)
                        if not session.in_transaction():
                            break
                        continue
                    slot.finish()
                    slot.outcome = DELIVERED
                    handled.append(slot)
        except Exception as exc:
            await self._batch_failed(slots, handled, exc)
            return
        for slot in handled:
            slot.recorded = True
        self._fenced(fenced, "handled")

    async def _batch_failed(self, slots: list[Slot], handled: list[Slot], exc: Exception) -> None:
        """The batch transaction failed as a whole (its commit, or the session), so nothing
        of it committed: retry transient failures later, find the item behind the others."""
        from outbox_engine.relay.failures import is_transient

        name = self.ctx.box.name
        text = error_text(exc)  # never the statement's parameters (payload values)
        if is_transient(exc):
            log.error(
                "box %s: inbox batch transaction failed (%s); its items stay pending", name, text
            )
            for slot in handled:
                slot.outcome = DEFERRED
            return
        if len(slots) == 1:
            slot = slots[0]
            log.error("box %s: inbox item %d refused at commit (%s)", name, slot.item.id, text)
            fail(self.ctx, slot, exc)
            return
        log.error(
            "box %s: inbox batch transaction failed (%s); handling its %d items one per "
            "transaction to find the one it fails on",
            name,
            text,
            len(slots),
        )
        stopped: set[str] = set()
        for slot in slots:
            slot.outcome, slot.recorded = DEFERRED, False
            if slot.item.event_key in stopped:
                continue  # keep the key's order: the rest waits for the next batch
            await self.deliver([slot])
            if slot.outcome.decision is not Decision.DELIVERED:
                stopped.add(slot.item.event_key)

    async def _handle(self, slot: Slot, session: AsyncSession) -> None:
        timeout = self.ctx.box.config.transport_timeout_seconds
        item = slot.item
        async with session.begin_nested():
            with handling(item.correlation_id, str(item.uuid), item.hop):
                for handler in self.ctx.box.transports_for(item.event_name):
                    assert isinstance(handler, InboxHandler)
                    check(
                        await asyncio.wait_for(handler.handle(item, slot.payload, session), timeout)
                    )
            await self.recorder.handled(session, item.id)
