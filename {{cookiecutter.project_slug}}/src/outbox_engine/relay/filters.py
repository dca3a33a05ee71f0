"""What of a claimed batch is not delivered at all, decided before delivery.

* refused: an item past the hop limit, an inbox message the consumer rejected, an event no
  transport is configured for: a permanent failure (dead, or parked in a strict box with
  ``poisoned_head: park``) without an attempt;
* superseded (``retry_strategies: [latest_available]``): a retried item after which a newer
  item of its key and event was delivered is discarded: sending it would go back in time;
* coalesced (items created with a coalescing key): an item after which a newer item of the
  same object is pending or delivered is discarded: the newer one carries the latest state.

Strict order, the third filter, runs at the database (the claim skips keys held behind an
item in backoff or failed, see store/items.py) and in delivery (a key stops at its first
undelivered item, see strategies/). Each look-up is one statement for the whole batch, and
only when some item of the batch can be dropped by it.

The superseded and coalesced look-ups read delivered items by key. On a table whose key index
holds every row they probe it per candidate on the relay's connections (kept, and on its
session settings: no sequential or bitmap scan, so a plan cached while the table had no page
stays on the index, see store/items.py). On a table whose key index holds open items only
(the class's `delivered_key_index = False`, store/models.py) they give the same answers from
a slower plan, on a connection of the pool as it comes, so the worker warns, once for
`latest_available` when it starts and once for the first batch with coalescing items.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.config.registry import Box
from outbox_engine.creation.shards import COALESCE_HEADER, OBJECT_HEADER
from outbox_engine.relay.batch import Slot
from outbox_engine.relay.outcomes import discarded, failed
from outbox_engine.store.items import ItemReads
from outbox_engine.store.pgconn import DriverConnections

SUPERSEDED = "latest_available: a newer item of this key and event was delivered"
COALESCED = "coalesced: a newer item of the same object supersedes it"

log = logging.getLogger("outbox_engine.relay.worker")


def unindexed_lookup(box: Box, what: str) -> str:
    """The warning for a look-up of delivered items by key on a box that does not index them."""
    cls = box.item_class.__name__
    return (
        f"box {box.name}: {what} looks up delivered items by key, and {box.table_name}'s key "
        f"index holds open items only ({cls}.delivered_key_index = False): the answers are "
        "the same, from a slower plan that grows with the table. Set "
        f"{cls}.delivered_key_index = True and migrate with "
        f'switch_key_index("{box.table_name}", delivered=True) (docs/operations.md)'
    )


class Filters:
    def __init__(
        self,
        box: Box,
        reads: ItemReads,
        relay_connections: DriverConnections,
        engine: AsyncEngine,
        rejected_header: str | None,
    ) -> None:
        self.box = box
        self.config = box.config
        self.reads = reads
        # Where the look-ups run (see the module's docstring).
        self._lookups = relay_connections if reads.lookups_on_index else DriverConnections(engine)
        # The header an inbox's consumer marks a message it could not take with (None: an
        # outbox, whose items carry no such mark).
        self.rejected_header = rejected_header
        self.latest_available = "latest_available" in self.config.retry_strategies
        indexed = box.item_class.delivered_key_index
        if self.latest_available and not indexed:
            log.warning("%s", unindexed_lookup(box, "latest_available"))
        self._coalescing_noted = indexed

    def refuse(self, slots: list[Slot]) -> list[Slot]:
        """The slots that may go; the others get their permanent failure."""
        live: list[Slot] = []
        max_hops = self.config.max_hops
        rejected = self.rejected_header
        for slot in slots:
            item = slot.item
            if item.hop > max_hops:
                reason = f"hop limit exceeded: hop {item.hop} > max_hops {max_hops}"
            elif rejected is not None and rejected in item.headers:
                reason = f"rejected by the consumer: {item.headers[rejected]}"
            elif not self.box.transports_for(item.event_name):
                reason = (
                    f"no transport configured for event {item.event_name!r} in box {self.box.name}"
                )
            else:
                live.append(slot)
                continue
            slot.outcome = failed(self.config, item.errors_count, reason, permanent=True)
        return live

    async def drop(self, live: list[Slot]) -> tuple[list[Slot], list[Slot]]:
        """(kept, discarded): superseded and coalesced items get their DISCARDED outcome."""
        dropped: list[Slot] = []
        if self.latest_available:
            live = await self._drop_superseded(live, dropped)
        if any(s.item.headers.get(COALESCE_HEADER) for s in live):
            live = await self._coalesce(live, dropped)
        return live, dropped

    async def _drop_superseded(self, slots: list[Slot], dropped: list[Slot]) -> list[Slot]:
        retries = [s for s in slots if s.item.errors_count > 0]
        if not retries:
            return slots
        superseded = await self._look_up(self.reads.superseded, retries)
        return _split(slots, superseded, SUPERSEDED, dropped)

    async def _coalesce(self, slots: list[Slot], dropped: list[Slot]) -> list[Slot]:
        candidates = [s for s in slots if s.item.headers.get(COALESCE_HEADER)]
        if not self._coalescing_noted:
            self._coalescing_noted = True
            log.warning("%s", unindexed_lookup(self.box, "coalescing"))
        objects = [str(s.item.headers.get(OBJECT_HEADER, "")) for s in candidates]
        newer_exists = await self._look_up(self.reads.coalesced, candidates, objects)
        return _split(slots, newer_exists, COALESCED, dropped)

    async def _look_up(
        self, lookup: Callable[..., Awaitable[set[int]]], slots: list[Slot], *more: list[str]
    ) -> set[int]:
        """One look-up (store/items.py) of these candidates' ids, keys and event names, then
        `more` columns, on the connection the module's docstring says."""
        async with self._lookups.acquire() as conn:
            return await lookup(
                conn,
                [s.item.id for s in slots],
                [s.item.event_key for s in slots],
                [s.item.event_name for s in slots],
                *more,
            )


def _split(slots: list[Slot], ids: set[int], reason: str, dropped: list[Slot]) -> list[Slot]:
    if not ids:
        return slots
    outcome = discarded(reason)
    kept: list[Slot] = []
    for slot in slots:
        if slot.item.id in ids:
            slot.outcome = outcome
            dropped.append(slot)
        else:
            kept.append(slot)
    return kept
