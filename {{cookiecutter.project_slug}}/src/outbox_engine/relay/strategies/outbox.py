"""The outbox's strategy: pipelined when the batch allows it, ordered otherwise.

The pipelined path (pipelined.py) needs every item of the batch to go only to pipelined
transports, no item middleware, and in a strict box transports that also fail in order
(`PipelinedTransport.fails_in_order`); any other batch goes the ordered way (ordered.py).
"""

from __future__ import annotations

from outbox_engine.relay.batch import Slot
from outbox_engine.relay.strategies.base import DeliveryContext
from outbox_engine.relay.strategies.ordered import deliver_ordered
from outbox_engine.relay.strategies.pipelined import deliver_pipelined, hold_keys_behind_failures
from outbox_engine.transports.base import PipelinedTransport


class OutboxDelivery:
    rejected_header: str | None = None

    def __init__(self, ctx: DeliveryContext) -> None:
        self.ctx = ctx
        self.strict = ctx.box.config.strict_order
        # Strict-order gaps a pipelined transport left (see hold_keys_behind_failures).
        self.order_gaps = 0

    async def deliver(self, slots: list[Slot]) -> None:
        if self._pipelined(slots):
            await deliver_pipelined(self.ctx, slots)
            if self.strict:
                self.order_gaps += hold_keys_behind_failures(self.ctx, slots)
            return
        await deliver_ordered(self.ctx, slots)

    def _pipelined(self, slots: list[Slot]) -> bool:
        if self.ctx.middlewares.item:
            return False
        strict = self.strict
        box = self.ctx.box
        return all(
            isinstance(t, PipelinedTransport) and (t.fails_in_order or not strict)
            for name in {slot.item.event_name for slot in slots}
            for t in box.transports_for(name)
        )
