"""Handlers of the {{ cookiecutter.inbox_item }} inbox box (user-editable).

A handler runs inside the transaction that marks its item delivered: write through the
given session and your changes commit exactly when the item does.
"""

from __future__ import annotations
{%- if cookiecutter.include_example_domain %}

import json
from decimal import Decimal
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from ..domain import rules
from ..domain.service import OrderNotFound, apply_payment
from ..messaging.create import Outbox
from ..messaging.resources import Resources
from ..messaging.transport import InboxHandler, ItemRecord, PermanentFailure

MALFORMED = "malformed payment_received payload"


def _refuse_constant(name: str) -> Any:
    raise ValueError("NaN and Infinity are not numbers here")


def parse_payment(payload: bytes) -> tuple[int, Decimal]:
    """(order id, amount) of a `payment_received` payload, validated by the domain's rules:
    the order id a JSON integer, the amount a positive number or decimal string with at most
    two decimals (read as a decimal, never through a float, and never rounded).

    Raises `PermanentFailure` naming the field; the reason never repeats payload values,
    since it is stored as the item's `last_error` and logged."""
    try:
        body = json.loads(payload, parse_float=Decimal, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        raise PermanentFailure(f"{MALFORMED}: not a JSON document") from None
    if not isinstance(body, dict):
        raise PermanentFailure(f"{MALFORMED}: not a JSON object")
    for field in ("order_id", "amount"):
        if field not in body:
            raise PermanentFailure(f"{MALFORMED}: {field} is missing")
    try:
        return rules.order_id(body["order_id"]), rules.money(body["amount"])
    except rules.RuleViolation as exc:
        raise PermanentFailure(f"{MALFORMED}: {exc}") from None


class PaymentReceivedHandler(InboxHandler):
    """`payment_received` {"order_id": int, "amount": number} adds to the order's paid amount
    and emits `order_paid` through the outbox, all in one transaction."""

    _outbox: Outbox | None = None

    async def setup(self, resources: Resources) -> None:
        self._outbox = resources.outbox

    async def handle(self, item: ItemRecord, payload: bytes, session: AsyncSession) -> bool:
        order_id, amount = parse_payment(payload)
        try:
            assert self._outbox is not None, "setup() was not called"
            await apply_payment(session, self._outbox, order_id, amount, payment_id=str(item.uuid))
        except OrderNotFound as exc:
            raise PermanentFailure(str(exc)) from None
        return True
{%- else %}

import logging

from sqlalchemy.ext.asyncio import AsyncSession

from ..messaging.transport import InboxHandler, ItemRecord

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
