"""One relay step for one box: claim a batch, deliver it, record the outcomes.

Two short transactions and no transaction open during network I/O:

1. claim (claim.py): up to `batch_size` pending, due items of the owned buckets, each
   bucket in id order;
2. filter (filters.py) and deliver (strategies/): refused and superseded items are decided
   without delivery; the others go to their transports or handlers, items of one key
   strictly in id order, by the strategy chosen once for the box's kind;
3. record (recording.py): one transaction applies each item's `Outcome` (outcomes.py),
   fenced against a worker that lost the bucket meanwhile.

Ownership of the buckets (see store/ownership.py) is what makes the claim exclusive, so
claimed rows need no "processing" status: a crash between 1 and 3 leaves them pending, and
the next owner sends them again (at-least-once, same message id).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from outbox_engine.config.registry import Box
from outbox_engine.middleware import Middlewares, run_batch_chain
from outbox_engine.observability.observer import Observer
from outbox_engine.relay.batch import BatchReport, Slot
from outbox_engine.relay.claim import Claimed, Claimer
from outbox_engine.relay.filters import Filters
from outbox_engine.relay.outcomes import Outcome
from outbox_engine.relay.recording import OutcomeRecorder
from outbox_engine.relay.strategies.base import DeliveryContext, Strategy
from outbox_engine.relay.strategies.inbox import InboxDelivery
from outbox_engine.relay.strategies.outbox import OutboxDelivery
from outbox_engine.store.pgconn import DriverConnections
from outbox_engine.transports.base import ItemRecord

# Every statement of the relay reads through an index (the pending index, the primary key,
# the uuid or (event_key, id) index); a generic plan made while the table looked empty would
# read the whole table instead, on every claim, until the next ANALYZE (see pgconn.py).
# And through a plain index scan, not a bitmap: delivered items leave dead entries in the
# pending index and the key index of open items until the next vacuum. An index scan marks
# the dead entries it passes so that later claims skip them; a bitmap scan visits them all
# again on every claim (a generic plan made while the table held a few pages read the key
# index of open items that way: 2-6 ms a claim after 30 s at 200 items/s, growing). And
# without a sort: the claim's order is the pending index's own, and a generic plan made on a
# table without a page, whose statistics said its rows had one or two keys, read the key
# index of open items whole and sorted it instead (5,990 buffers for 64 items of one bucket
# behind 3,000, against 507; growing with the backlog). Where every plan of a statement
# sorts (the flush's claim by id), the setting changes nothing.
RELAY_SESSION_SETTINGS = {
    "enable_seqscan": "off",
    "enable_bitmapscan": "off",
    "enable_sort": "off",
}

__all__ = ["RELAY_SESSION_SETTINGS", "BatchReport", "BoxProcessor", "Slot"]


class BoxProcessor:
    def __init__(
        self,
        box: Box,
        engine: AsyncEngine,
        session_factory: async_sessionmaker[AsyncSession],
        middlewares: Middlewares,
        observer: Observer | None = None,
        keep_connections: bool = False,
    ) -> None:
        self.box = box
        self.config = box.config
        self.middlewares = middlewares
        self.observer = observer or Observer()
        # A worker's processor keeps its connections between batches.
        self._connections = DriverConnections(
            engine, keep=keep_connections, settings=RELAY_SESSION_SETTINGS
        )
        self.claimer = Claimer(box, self._connections)
        self.recording = OutcomeRecorder(box, self._connections, self.observer)
        ctx = DeliveryContext(box, middlewares, self.observer)
        self._outbox: OutboxDelivery | None = None
        self.strategy: Strategy
        if box.kind == "inbox":
            self.strategy = InboxDelivery(ctx, session_factory, self.recording.fenced)
        else:
            self.strategy = self._outbox = OutboxDelivery(ctx)
        self.filters = Filters(
            box, self.claimer.reads, self._connections, engine, self.strategy.rejected_header
        )

    @property
    def fenced_total(self) -> int:
        """Outcomes dropped by the fence since start (see store/record.py)."""
        return self.recording.fenced_total

    @property
    def order_gaps(self) -> int:
        """Strict-order gaps a pipelined transport left (see strategies/pipelined.py)."""
        return self._outbox.order_gaps if self._outbox is not None else 0

    async def claim(self, buckets: Sequence[int], paused_keys: Collection[str] = ()) -> Claimed:
        return await self.claimer.claim(buckets, paused_keys)

    async def run_once(
        self,
        buckets: Sequence[int],
        paused_keys: Collection[str] = (),
        owns: Callable[[int], bool] | None = None,
    ) -> BatchReport:
        """Relay one batch; items of `paused_keys` (the kill switch) stay pending, untouched.

        `owns(bucket)` is asked again once the claim returns: items of a bucket this worker
        lost meanwhile (its lock connection dropped) are left alone for the new owner."""
        report = BatchReport()
        if not buckets:
            return report
        claimed = await self.claimer.claim(buckets, paused_keys)
        left_more = self.claimer.left_more
        if owns is not None:
            claimed = [(item, payload) for item, payload in claimed if owns(item.bucket)]
        await self._process(claimed, report)
        report.more = left_more or report.deferred > 0
        return report

    async def process_ids(
        self, message_ids: Sequence[UUID], paused_keys: Collection[str] = ()
    ) -> dict[UUID, Outcome]:
        """Deliver these items now (synchronous flush; the caller holds their buckets' locks),
        each only if it heads its key: an item with an older pending (or, in a strict box,
        failed) item of its key is left to the worker, in order; paused keys are left too."""
        claimed = await self.claimer.claim_ids(message_ids, paused_keys)
        slots = await self._process(claimed, BatchReport())
        return {slot.item.uuid: slot.outcome for slot in slots}

    async def _process(self, claimed: Claimed, report: BatchReport) -> list[Slot]:
        report.claimed = len(claimed)
        if not claimed:
            return []
        started = time.monotonic()
        self.observer.claimed(self.box, len(claimed))
        slots = [Slot(item, payload) for item, payload in claimed]
        live, _discarded = await self.filters.drop(self.filters.refuse(slots))

        async def deliver() -> None:
            if live:
                await self.strategy.deliver(live)

        items: list[ItemRecord] = [s.item for s in live]
        await run_batch_chain(self.middlewares.batch, self.box, items, deliver)
        await self.recording.record(slots, report)
        self.recording.observe(slots, time.monotonic() - started)
        return slots

    async def close(self) -> None:
        """Return the kept connections to the pool."""
        await self._connections.close()
