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


{% with cls = outbox_class, mixin = 'OutboxItemMixin', table = cookiecutter.outbox_item ~ '_outbox_items', event_types = 'OrderCreated, OrderUpdated, OrderPaid' if cookiecutter.include_example_domain else '' -%}
{% include 'src/{{cookiecutter.package_name}}/scaffold/item_class.py.j2' %}
{%- endwith %}

{% with cls = inbox_class, mixin = 'InboxItemMixin', table = cookiecutter.inbox_item ~ '_inbox_items', event_types = 'PaymentReceived' if cookiecutter.include_example_domain else '' -%}
{% include 'src/{{cookiecutter.package_name}}/scaffold/item_class.py.j2' %}
{%- endwith -%}
