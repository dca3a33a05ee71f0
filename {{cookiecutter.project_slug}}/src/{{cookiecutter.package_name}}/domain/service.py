{%- set outbox_class = cookiecutter.outbox_item.title().replace('_', '') ~ 'OutboxItem' -%}
"""Order use cases. Each write and its outbox item commit in the caller's transaction."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import func

from outbox_engine import Outbox

from ..items import {{ outbox_class }} as OutboxItem
from .events import OrderCreated, OrderPaid, OrderUpdated
from .models import Order
from .rules import check_amount_editable, check_transition, money


class OrderNotFound(LookupError):
    def __init__(self, order_id: int) -> None:
        super().__init__(f"order {order_id} does not exist")
        self.order_id = order_id


def order_fields(order: Order) -> dict[str, Any]:
    """The order as its events carry it (domain/events.py: OrderState)."""
    return {
        "id": order.id,
        "customer_id": order.customer_id,
        "amount": float(order.amount),
        "status": order.status,
        "version": order.version,
        "paid_amount": float(order.paid_amount),
    }


async def create_order(
    session: AsyncSession, outbox: Outbox, customer_id: str, amount: Decimal
) -> Order:
    order = Order(
        customer_id=customer_id, amount=amount, status="created", version=1, paid_amount=Decimal(0)
    )
    session.add(order)
    # The INSERT returns the server defaults (id, created_at, updated_at) with RETURNING
    # (SQLAlchemy's eager defaults on PostgreSQL): no refresh, no second statement.
    await session.flush()
    await outbox.create(
        session, OutboxItem, event_key=order.id, payload=OrderCreated(**order_fields(order))
    )
    return order


async def update_order(
    session: AsyncSession,
    outbox: Outbox,
    order_id: int,
    *,
    status: str | None = None,
    amount: Decimal | None = None,
) -> Order:
    """Change the status (along the state machine of rules.py) and/or the amount (while the
    order is `created`). A request that changes nothing writes nothing and emits nothing.
    Raises `OrderNotFound` or `rules.InvalidTransition`."""
    # The row lock makes concurrent updates of one order take turns: each sees the status
    # the previous one left, versions are consecutive and their outbox items are inserted in
    # version order.
    order = (
        await session.execute(
            select(Order)
            .where(Order.id == order_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    ).scalar_one_or_none()
    if order is None:
        raise OrderNotFound(order_id)
    changes: dict[str, Any] = {}
    if status is not None and status != order.status:
        check_transition(order.status, status)
        changes["status"] = status
    if amount is not None and money(amount) != order.amount:
        check_amount_editable(order.status)
        changes["amount"] = amount
    if not changes:
        return order
    order = (
        await session.execute(
            update(Order)
            .where(Order.id == order_id)
            .values(**changes, version=Order.version + 1, updated_at=func.now())
            .returning(Order)
            .execution_options(populate_existing=True)
        )
    ).scalar_one()
    await outbox.create(
        session, OutboxItem, event_key=order.id, payload=OrderUpdated(**order_fields(order))
    )
    return order


async def get_order(session: AsyncSession, order_id: int) -> Order:
    order = await session.get(Order, order_id)
    if order is None:
        raise OrderNotFound(order_id)
    return order


async def apply_payment(
    session: AsyncSession, outbox: Outbox, order_id: int, amount: Decimal, payment_id: str
) -> Order:
    """Add a payment to the order. `amount` must pass `rules.money` (positive, at most two
    decimals: it is never rounded); a sum beyond Numeric(14, 2) is refused by the database
    (numeric overflow), which fails the payment for good."""
    amount = money(amount)
    order = (
        await session.execute(
            update(Order)
            .where(Order.id == order_id)
            .values(
                paid_amount=Order.paid_amount + amount,
                version=Order.version + 1,
                updated_at=func.now(),
            )
            .returning(Order)
        )
    ).scalar_one_or_none()
    if order is None:
        raise OrderNotFound(order_id)
    paid = OrderPaid(**order_fields(order), payment_id=payment_id, payment_amount=float(amount))
    await outbox.create(session, OutboxItem, event_key=order.id, payload=paid)
    return order


async def find_orders(session: AsyncSession, ids: list[int]) -> list[Order]:
    return list((await session.execute(select(Order).where(Order.id.in_(ids)))).scalars())
