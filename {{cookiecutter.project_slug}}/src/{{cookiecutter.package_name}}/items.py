{%- set outbox_class = cookiecutter.outbox_item.title().replace('_', '') ~ 'OutboxItem' -%}
{%- set inbox_class = cookiecutter.inbox_item.title().replace('_', '') ~ 'InboxItem' -%}
"""The service's outbox and inbox items: one table each (user-editable).

Add boxes with `{{ cookiecutter.project_slug }} generate item NAME --kind outbox|inbox`.

`event_types` declares the pydantic model of each event of a box (outbox_engine/contracts/events.py): the
payloads `create` accepts for it, what `EventHandler`s parse, and the contract published in
contracts/asyncapi.json (`{{ cookiecutter.project_slug }} asyncapi`).
"""

from __future__ import annotations

from outbox_engine import EventTypes, InboxItemMixin, OutboxItemMixin

from .db import Base
{%- if cookiecutter.include_example_domain %}
from .domain.events import OrderCreated, OrderPaid, OrderUpdated, PaymentReceived
{%- endif %}


class {{ outbox_class }}(OutboxItemMixin, Base):
    __tablename__ = "{{ cookiecutter.outbox_item }}_outbox_items"
{%- if cookiecutter.include_example_domain %}
    event_types = EventTypes(OrderCreated, OrderUpdated, OrderPaid)
{%- else %}
    # e.g. EventTypes(ThingCreated, ThingUpdated): models of `Event` with an event_name
    event_types = EventTypes()
{%- endif %}


class {{ inbox_class }}(InboxItemMixin, Base):
    __tablename__ = "{{ cookiecutter.inbox_item }}_inbox_items"
{%- if cookiecutter.include_example_domain %}
    event_types = EventTypes(PaymentReceived)
{%- else %}
    event_types = EventTypes()
{%- endif %}
