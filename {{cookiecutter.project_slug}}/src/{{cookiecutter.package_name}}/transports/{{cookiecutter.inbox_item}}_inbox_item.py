{%- if cookiecutter.include_example_domain -%}
"""Handlers of the {{ cookiecutter.inbox_item }} inbox box (user-editable).

A handler runs inside the transaction that marks its item delivered: write through the
given session and your changes commit exactly when the item does.
"""

from __future__ import annotations

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
{% else -%}
{#- Rendered from the scaffold `generate item NAME --kind inbox` renders: one source. -#}
{%- with title = 'Handlers of the ' ~ cookiecutter.inbox_item ~ ' inbox box', cls = cookiecutter.inbox_item.title().replace('_', '') ~ 'LogHandler' -%}
{% include 'src/{{cookiecutter.package_name}}/scaffold/inbox_handler.py.j2' %}
{%- endwith -%}
{%- endif -%}
