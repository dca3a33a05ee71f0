"""The example domain's rules, in one place: which status changes an order may make, and what
a money amount and an order id must be. The API, the service and the payment handler all
check through here, so an HTTP request and a Kafka message are held to the same rules.

Order statuses (the state machine; docs/example-domain.md shows the same table):

    created -> paid | cancelled
    paid    -> shipped | refunded
    shipped -> delivered
    delivered, cancelled, refunded: final

Setting the status an order already has is not a change: nothing is written and no event is
emitted. The amount may be changed only while the order is `created`.

Errors name the field and the rule, never the refused value: they end up in logs and in
the inbox's `last_error`, which operators read and which must not carry payload data.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Literal, get_args

OrderStatus = Literal["created", "paid", "shipped", "delivered", "cancelled", "refunded"]
STATUSES: tuple[str, ...] = get_args(OrderStatus)
TRANSITIONS: dict[str, frozenset[str]] = {
    "created": frozenset({"paid", "cancelled"}),
    "paid": frozenset({"shipped", "refunded"}),
    "shipped": frozenset({"delivered"}),
    "delivered": frozenset(),
    "cancelled": frozenset(),
    "refunded": frozenset(),
}
AMOUNT_EDITABLE_IN = "created"

# orders.amount and orders.paid_amount are Numeric(14, 2): 12 digits before the point.
AMOUNT_DECIMALS = 2
AMOUNT_DIGITS = 14
MAX_AMOUNT = Decimal(10) ** (AMOUNT_DIGITS - AMOUNT_DECIMALS) - Decimal("0.01")
MAX_ORDER_ID = 2**63 - 1  # orders.id is a bigint


class RuleViolation(ValueError):
    """Input that breaks a rule; the message names the field and the rule."""


class InvalidTransition(RuleViolation):
    """The order's current status does not allow the requested change."""


def check_transition(current: str, new: str) -> None:
    """Raise unless `current -> new` is allowed (a status to itself is not a change and is
    not checked here)."""
    allowed = TRANSITIONS.get(current, frozenset())
    if new not in allowed:
        options = ", ".join(sorted(allowed)) or "none: it is final"
        raise InvalidTransition(
            f"status: an order in status {current!r} cannot become {new!r} (allowed: {options})"
        )


def check_amount_editable(status: str) -> None:
    if status != AMOUNT_EDITABLE_IN:
        raise InvalidTransition(
            f"amount: can only change while the order is {AMOUNT_EDITABLE_IN!r}, not {status!r}"
        )


def money(value: object, field: str = "amount") -> Decimal:
    """A positive amount with at most two decimals that fits Numeric(14, 2).

    Accepts an int, a Decimal (what `json.loads(..., parse_float=Decimal)` gives for a JSON
    number) or a decimal string ("10.00"); refuses bool, float (its binary value is not the
    amount that was written), NaN and infinities, and never rounds."""
    if isinstance(value, bool) or not isinstance(value, int | Decimal | str):
        raise RuleViolation(f"{field}: must be a number or a decimal string")
    if isinstance(value, str) and (
        not 0 < len(value) <= 32 or not all(c in "0123456789." for c in value)
    ):
        raise RuleViolation(f"{field}: must be a decimal string like 12.50")
    try:
        amount = Decimal(value)
    except ArithmeticError:
        raise RuleViolation(f"{field}: must be a decimal number") from None
    if not amount.is_finite():
        raise RuleViolation(f"{field}: must be a finite number")
    if amount <= 0:
        raise RuleViolation(f"{field}: must be positive")
    if amount > MAX_AMOUNT:
        raise RuleViolation(f"{field}: must be at most {MAX_AMOUNT}")
    exponent = amount.normalize().as_tuple().exponent
    if isinstance(exponent, int) and -exponent > AMOUNT_DECIMALS:
        raise RuleViolation(
            f"{field}: at most {AMOUNT_DECIMALS} decimal places (amounts are never rounded)"
        )
    return amount


def order_id(value: object, field: str = "order_id") -> int:
    """An order id: a JSON integer (not true, 11.9 or "11") between 1 and the bigint max."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise RuleViolation(f"{field}: must be an integer")
    if not 1 <= value <= MAX_ORDER_ID:
        raise RuleViolation(f"{field}: must be 1-{MAX_ORDER_ID}")
    return value
