{%- set outbox_class = cookiecutter.outbox_item.title().replace('_', '') ~ 'OutboxItem' -%}
{%- set inbox_class = cookiecutter.inbox_item.title().replace('_', '') ~ 'InboxItem' -%}
"""The service's outbox and inbox items: one table each (user-editable).

Add boxes with `{{ cookiecutter.project_slug }} generate item NAME --kind outbox|inbox`.
"""

from __future__ import annotations

from .db import Base
from .messaging.models import InboxItemMixin, OutboxItemMixin


class {{ outbox_class }}(OutboxItemMixin, Base):
    __tablename__ = "{{ cookiecutter.outbox_item }}_outbox_items"


class {{ inbox_class }}(InboxItemMixin, Base):
    __tablename__ = "{{ cookiecutter.inbox_item }}_inbox_items"
