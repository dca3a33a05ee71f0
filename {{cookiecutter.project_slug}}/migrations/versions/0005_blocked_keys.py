"""Blocked keys: a partial index of the items that hold back the later items of their key.

A strict box claims an item only when no older item of its key is in backoff or failed for
good; this index holds exactly those (rarely more than a handful of rows), so the check is
one small index probe per claimed row, and a key in backoff never fills a bucket's claim
with items that cannot go (which would starve the other keys of the bucket).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from collections.abc import Sequence

from alembic import op

from outbox_engine.store.models import BLOCKING_ROWS, blocked_index_name

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("{{ cookiecutter.outbox_item }}_outbox_items", "{{ cookiecutter.inbox_item }}_inbox_items")


def upgrade() -> None:
    for table in TABLES:
        op.create_index(
            blocked_index_name(table),
            table,
            ["event_key", "id"],
            postgresql_where=BLOCKING_ROWS,
            # Tables created after this revision (create_item_table) have it already.
            if_not_exists=True,
        )


def downgrade() -> None:
    for table in TABLES:
        op.drop_index(blocked_index_name(table), table_name=table, if_exists=True)
