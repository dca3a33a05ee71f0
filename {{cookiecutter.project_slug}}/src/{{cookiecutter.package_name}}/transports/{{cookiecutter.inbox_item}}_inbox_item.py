"""Handlers of the {{ cookiecutter.inbox_item }} inbox box (user-editable).

A handler runs inside the transaction that marks its item delivered: write through the
given session and your changes commit exactly when the item does.
"""

from __future__ import annotations
{%- if cookiecutter.include_example_domain %}

from sqlalchemy.ext.asyncio import AsyncSession

from outbox_engine import EventHandler, ItemRecord, Outbox, PermanentFailure, Resources

from ..domain.events import PaymentReceived
from ..domain.service import OrderNotFound, apply_payment


class PaymentReceivedHandler(EventHandler[PaymentReceived]):
    """`payment_received` (domain/events.py: PaymentReceived) adds to the order's paid
    amount and emits `order_paid` through the outbox, all in one transaction. A payload that
    does not validate fails at once, its reason naming the field (never the values)."""

    _outbox: Outbox | None = None

    async def setup(self, resources: Resources) -> None:
        self._outbox = resources.outbox

    async def handle_event(
        self, item: ItemRecord, event: PaymentReceived, session: AsyncSession
    ) -> bool:
        try:
            assert self._outbox is not None, "setup() was not called"
            await apply_payment(
                session, self._outbox, event.order_id, event.amount, payment_id=str(item.uuid)
            )
        except OrderNotFound as exc:
            raise PermanentFailure(str(exc)) from None
        return True
{%- else %}

import logging

from sqlalchemy.ext.asyncio import AsyncSession

from outbox_engine import InboxHandler, ItemRecord

log = logging.getLogger(__name__)


class {{ cookiecutter.inbox_item.title().replace('_', '') }}LogHandler(InboxHandler):
    """A working default: logs each message. Replace the body with your business logic."""

    async def handle(self, item: ItemRecord, payload: bytes, session: AsyncSession) -> bool:
        log.info(
            "received %s key=%s (%d bytes)",
            item.event_name,
            item.event_key,
            len(payload),
            extra={"box": item.box, "item_id": item.id, "message_id": str(item.uuid)},
        )
        return True
{%- endif %}
