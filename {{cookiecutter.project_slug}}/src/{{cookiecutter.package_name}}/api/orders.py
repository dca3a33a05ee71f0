"""Example domain routes: each write commits the order and its outbox item together."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, status
from pydantic import BaseModel, Field
from sqlalchemy.ext.asyncio import AsyncSession

from ..domain import service
from ..domain.models import Order
from ..messaging.create import Outbox
from . import deps

router = APIRouter(prefix="/orders", tags=["orders"])


class CreateOrder(BaseModel):
    customer_id: str = Field(min_length=1, max_length=255)
    amount: Decimal = Field(gt=0, max_digits=14, decimal_places=2)


class UpdateOrder(BaseModel):
    status: str = Field(min_length=1, max_length=64)


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
    order_id: int, body: UpdateOrder, session: Session, outbox: OutboxDep
) -> OrderOut:
    try:
        async with session.begin():
            order = await service.update_status(session, outbox, order_id, body.status)
    except service.OrderNotFound as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    return OrderOut.of(order)


@router.get("/{order_id}")
async def get_order(order_id: int, session: Session) -> OrderOut:
    try:
        order = await service.get_order(session, order_id)
    except service.OrderNotFound as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    return OrderOut.of(order)
