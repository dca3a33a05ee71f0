"""The example boxes' key index holds open rows only (pending or failed for good).

Their classes (items.py) say `delivered_key_index = False`: marking an item delivered then
writes no entry into the (event_key, id) index: 40% less of what a delivered row costs
PostgreSQL on a table that keeps millions of them, a third less on an empty one
(docs/performance.md). The new index is
built without blocking writes, then the old one dropped (schema.switch_key_index); on a new
database both tables are empty and this takes no time.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28
"""

from collections.abc import Sequence

from outbox_engine.store.schema import switch_key_index

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("{{ cookiecutter.outbox_item }}_outbox_items", "{{ cookiecutter.inbox_item }}_inbox_items")


def upgrade() -> None:
    for table in TABLES:
        switch_key_index(table, delivered=False)


def downgrade() -> None:
    for table in TABLES:
        switch_key_index(table, delivered=True)
