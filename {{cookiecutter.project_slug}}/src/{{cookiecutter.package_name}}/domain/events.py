"""The example domain's events: the contract other services read (orders) and the one this
service accepts (payments). Declared on the item classes in items.py, published in
contracts/asyncapi.json, checked with `{{ cookiecutter.project_slug }} asyncapi --check`.

Amounts of the order events are JSON numbers (floats), as they have been since the first
version: consumers read them so, and changing their type would break them. A payment's
amount is read exactly (a decimal, never through a float) and held to the domain's rules."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, ClassVar

from pydantic import AfterValidator, Field, Strict

from outbox_engine import Event

from . import rules

# A money amount as the API and the payment events take it: a positive decimal with at most
# two places that fits orders.amount (Numeric(14, 2)), never rounded (rules.money).
Amount = Annotated[
    Decimal,
    Field(
        gt=0,
        le=rules.MAX_AMOUNT,
        max_digits=rules.AMOUNT_DIGITS,
        decimal_places=rules.AMOUNT_DECIMALS,
        allow_inf_nan=False,
    ),
    AfterValidator(rules.money),
]


class OrderState(Event):
    """An order as its events carry it."""

    id: int
    customer_id: str
    amount: float
    status: rules.OrderStatus
    version: int
    paid_amount: float


class OrderCreated(OrderState):
    event_name: ClassVar[str] = "order_created"
    schema_version: ClassVar[int] = 1


class OrderUpdated(OrderState):
    """The order after a change of status or amount."""

    event_name: ClassVar[str] = "order_updated"
    schema_version: ClassVar[int] = 1


class OrderPaid(OrderState):
    """The order after a payment, with the payment that was applied."""

    event_name: ClassVar[str] = "order_paid"
    schema_version: ClassVar[int] = 1

    payment_id: str
    payment_amount: float


class PaymentReceived(Event):
    """A payment for an order: adds `amount` to its paid amount."""

    event_name: ClassVar[str] = "payment_received"
    schema_version: ClassVar[int] = 1

    order_id: Annotated[int, Strict(), Field(ge=1, le=rules.MAX_ORDER_ID)]
    amount: Amount
