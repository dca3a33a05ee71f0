"""Ordered delivery: one task per item, items of a key handed over in id order.

Used when a batch has an item that a plain (non-pipelined) transport takes, or item
middlewares wrap each delivery, or a strict box uses a transport that may fail out of order.
Items of different keys go concurrently; an item of a key waits for the previous item of its
key (`Slot.released`): in a strict box until that one was delivered, otherwise until it was
handed to its pipelined transports (which keep their order). An item behind one that was not
delivered is not attempted (DEFERRED): the key goes on in order in the next batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from outbox_engine.middleware import run_item_chain
from outbox_engine.relay.batch import Slot, check
from outbox_engine.relay.outcomes import DEFERRED, DELIVERED, Decision
from outbox_engine.relay.strategies.base import DeliveryContext, fail
from outbox_engine.transports.base import PipelinedTransport, Transport


async def deliver_ordered(ctx: DeliveryContext, slots: list[Slot]) -> None:
    previous: dict[str, Slot] = {}
    tasks = []
    for slot in slots:
        prev = previous.get(slot.item.event_key)
        previous[slot.item.event_key] = slot
        tasks.append(asyncio.ensure_future(_deliver_one(ctx, slot, prev)))
    await asyncio.gather(*tasks)


async def _deliver_one(ctx: DeliveryContext, slot: Slot, prev: Slot | None) -> None:
    try:
        if prev is not None:
            await prev.released.wait()
            if not prev.released_ok:
                slot.outcome = DEFERRED  # keep the key's order: wait for the next batch
                return

        async def innermost() -> None:
            await _send(ctx, slot)

        slot.start(ctx.observer, ctx.box)
        await run_item_chain(ctx.middlewares.item, ctx.box, slot.item, innermost)
        slot.outcome = DELIVERED
        slot.finish()
    except Exception as exc:
        fail(ctx, slot, exc)
        slot.finish(exc)
    finally:
        if slot.outcome.decision is Decision.DELIVERED:
            slot.release()
        slot.released.set()


async def _send(ctx: DeliveryContext, slot: Slot) -> None:
    config = ctx.box.config
    timeout = config.transport_timeout_seconds
    pending: list[Awaitable[Any]] = []
    for transport in ctx.box.transports_for(slot.item.event_name):
        if isinstance(transport, PipelinedTransport) and not config.strict_order:
            pending.append(transport.enqueue(slot.item, slot.payload))
        else:
            assert isinstance(transport, Transport)
            check(await asyncio.wait_for(transport(slot.item, slot.payload), timeout))
    # Later items of this key may be handed over now: the transports keep their order.
    if not config.strict_order:
        slot.release()
    for future in pending:
        check(await asyncio.wait_for(future, timeout))
