"""Example domain routes: each write commits the order and its outbox item together.

Input is validated strictly (domain/rules.py): amounts are positive decimals with at most two
places that fit the column, ids are integers within bigint, statuses follow the order state
machine (an impossible change is 409), and a PATCH that changes nothing emits nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, status
from pydantic import BaseModel, ConfigDict, Field, model_validator
from sqlalchemy.ext.asyncio import AsyncSession

from outbox_engine.creation.items import Outbox

from ..domain import rules, service
from ..domain.events import Amount
from ..domain.models import Order
from . import deps
from .params import StrictInt

router = APIRouter(prefix="/orders", tags=["orders"])


OrderId = Annotated[StrictInt, Path(ge=1, le=rules.MAX_ORDER_ID)]


class CreateOrder(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # NUL and unpaired surrogates never get here: the body guard refuses them in any string.
    customer_id: str = Field(min_length=1, max_length=255)
    amount: Amount


class UpdateOrder(BaseModel):
    """What to change: the status, the amount, or both; at least one."""

    model_config = ConfigDict(extra="forbid")

    status: rules.OrderStatus | None = None
    amount: Amount | None = None

    @model_validator(mode="after")
    def _something(self) -> UpdateOrder:
        if self.status is None and self.amount is None:
            raise ValueError("give status, amount or both")
        return self


class OrderOut(BaseModel):
    id: int
    customer_id: str
    amount: float
    status: str
    version: int
    paid_amount: float
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, order: Order) -> OrderOut:
        return cls(
            id=order.id,
            customer_id=order.customer_id,
            amount=float(order.amount),
            status=order.status,
            version=order.version,
            paid_amount=float(order.paid_amount),
            created_at=order.created_at,
            updated_at=order.updated_at,
        )


Session = Annotated[AsyncSession, Depends(deps.session)]
OutboxDep = Annotated[Outbox, Depends(deps.outbox)]


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_order(body: CreateOrder, session: Session, outbox: OutboxDep) -> OrderOut:
    async with session.begin():
        order = await service.create_order(session, outbox, body.customer_id, body.amount)
    return OrderOut.of(order)


@router.patch("/{order_id}")
async def update_order(
    order_id: OrderId, body: UpdateOrder, session: Session, outbox: OutboxDep
) -> OrderOut:
    try:
        async with session.begin():
            order = await service.update_order(
                session, outbox, order_id, status=body.status, amount=body.amount
            )
    except service.OrderNotFound as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    except rules.InvalidTransition as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    return OrderOut.of(order)


@router.get("/{order_id}")
async def get_order(order_id: OrderId, session: Session) -> OrderOut:
    try:
        order = await service.get_order(session, order_id)
    except service.OrderNotFound as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    return OrderOut.of(order)
