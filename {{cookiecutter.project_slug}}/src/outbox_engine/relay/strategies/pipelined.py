"""Pipelined delivery: the whole batch handed to each transport at once.

Used when every item of a batch goes only to `PipelinedTransport`s and no item middleware
wraps deliveries (see outbox.py): each transport gets its items in id order in one call
(`enqueue_many`, e.g. a Kafka producer's buffer) and the batch waits for all delivery
reports, at most the box's transport timeout. No per-item task, event or await: this is the
hot path of an outbox. In a strict box the transports used also fail in order, and
`hold_keys_behind_failures` turns the items after a key's first failure back into not
attempted, so the key goes on in order in the next batch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence

from outbox_engine.relay.batch import Slot, TransportFailed
from outbox_engine.relay.outcomes import DEFERRED, DELIVERED, Decision
from outbox_engine.relay.strategies.base import DeliveryContext, fail
from outbox_engine.transports.base import BaseTransport, PipelinedTransport

log = logging.getLogger(__name__)

Reports = Sequence[BaseException | bool | None]


async def deliver_pipelined(ctx: DeliveryContext, slots: list[Slot]) -> None:
    """Hand the whole batch to each transport in id order and wait for all outcomes."""
    box, observer = ctx.box, ctx.observer
    # transport -> positions of its slots (most boxes have one transport per event); an
    # event's transports are looked up once per batch, not once per item.
    groups: dict[int, tuple[PipelinedTransport, list[int]]] = {}
    by_event: dict[str, list[list[int]]] = {}
    scoped = observer.observes("processing")
    for position, slot in enumerate(slots):
        if scoped:
            slot.start(observer, box)
        targets = by_event.get(slot.item.event_name)
        if targets is None:
            targets = by_event[slot.item.event_name] = _targets(
                groups, box.transports_for(slot.item.event_name)
            )
        for positions in targets:
            positions.append(position)
    calls: list[Awaitable[Reports]] = []
    for transport, positions in groups.values():
        try:
            calls.append(
                transport.enqueue_many([(slots[p].item, slots[p].payload) for p in positions])
            )
        except Exception as exc:
            calls.append(_failed_all(exc, len(positions)))
    results = await _outcomes(calls, box.config.transport_timeout_seconds)
    errors: list[BaseException | None] = [None] * len(slots)
    refused = [False] * len(slots)
    for (_transport, positions), outcome in zip(groups.values(), results, strict=True):
        if isinstance(outcome, BaseException):
            for position in positions:
                errors[position] = errors[position] or outcome
            continue
        for position, result in zip(positions, outcome, strict=True):
            if isinstance(result, BaseException):
                errors[position] = errors[position] or result
            elif result is False:
                refused[position] = True
    for slot, error, was_refused in zip(slots, errors, refused, strict=True):
        if error is not None:
            fail(ctx, slot, error)
        elif was_refused:
            error = TransportFailed("transport returned False")
            fail(ctx, slot, error)
        else:
            slot.outcome = DELIVERED
        if scoped:
            slot.finish(error)


def hold_keys_behind_failures(ctx: DeliveryContext, slots: list[Slot]) -> int:
    """Strict order after a pipelined batch: behind a key's first item that was not
    delivered, the key's later items count as not attempted (they go again after it).
    One of them delivered anyway is a gap in the key's order: an error, counted (returned)."""
    gaps = 0
    stopped: set[str] = set()
    for slot in slots:
        key = slot.item.event_key
        if key not in stopped:
            if slot.outcome.decision is not Decision.DELIVERED:
                stopped.add(key)
            continue
        if slot.outcome.decision is Decision.DELIVERED:
            gaps += 1
            ctx.observer.order_gap(ctx.box, slot.item)
            log.error(
                "box %s: item %s of key %r was delivered after an earlier item of its key "
                "failed in the same batch (the transport did not fail in order)",
                ctx.box.name,
                slot.item.id,
                key,
            )
        else:
            slot.outcome = DEFERRED
    return gaps


def _targets(
    groups: dict[int, tuple[PipelinedTransport, list[int]]], transports: Sequence[BaseTransport]
) -> list[list[int]]:
    """The position lists of `transports`' groups, made on first use."""
    targets: list[list[int]] = []
    for transport in transports:
        assert isinstance(transport, PipelinedTransport)
        group = groups.get(id(transport))
        if group is None:
            group = groups[id(transport)] = (transport, [])
        targets.append(group[1])
    return targets


async def _outcomes(
    calls: list[Awaitable[Reports]], seconds: float
) -> list[Reports | BaseException]:
    """Each call's reports, or what it raised; a `TimeoutError` for every call when they are
    not all in within `seconds`. One call (the usual batch: one Kafka transport) is awaited
    as it is: `gather` would add a future and a turn of the event loop to every batch."""
    expired = TimeoutError(f"no delivery report within {seconds:g}s")
    if len(calls) != 1:
        try:
            return await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), seconds)
        except TimeoutError:
            return [expired] * len(calls)
    deadline = asyncio.timeout(seconds)
    try:
        async with deadline:
            return [await calls[0]]
    except TimeoutError as exc:
        # The deadline's, or the call's own error (reported as `gather` would report it).
        return [expired if deadline.expired() else exc]
    except Exception as exc:
        return [exc]
    except asyncio.CancelledError as exc:
        # The call's own future cancelled (as `gather` reports it), not this task: that is
        # cancelled only when `cancelling()` says so.
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        return [exc]


async def _failed_all(exc: BaseException, count: int) -> list[BaseException | bool | None]:
    return [exc] * count
