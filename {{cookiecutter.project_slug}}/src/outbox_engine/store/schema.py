"""DDL of an item table, shared by every alembic revision that creates one.

Alembic loads revision files by path, so the layout lives here, in the package: the
initial revision and every revision written by `generate item` call `create_item_table`,
and all item tables get the same columns and indexes as `models.ItemMixin` declares.
`switch_key_index` is the revision that follows a change of a class's `delivered_key_index`.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from outbox_engine.store.models import (
    BLOCKING_ROWS,
    blocked_index_name,
    key_index_name,
    key_index_where,
)


def create_item_table(name: str, inbox: bool, *, delivered_key_index: bool = True) -> None:
    """An outbox or inbox table with the engine's columns and indexes; `delivered_key_index`
    as the item class says (models.ItemMixin)."""
    columns: list[sa.Column[Any]] = [
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), primary_key=True),
        sa.Column("uuid", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("event_name", sa.String(255), nullable=False),
        sa.Column("event_key", sa.String(255), nullable=False),
        sa.Column("bucket", sa.Integer(), nullable=False),
        sa.Column("status", sa.SmallInteger(), nullable=False, server_default=sa.text("0")),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column(
            "headers", postgresql.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")
        ),
        sa.Column("errors_count", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("processed_at", sa.DateTime(timezone=True), nullable=True),
    ]
    if inbox:
        columns += [
            sa.Column("source_topic", sa.String(255), nullable=True),
            sa.Column("source_partition", sa.Integer(), nullable=True),
            sa.Column("source_offset", sa.BigInteger(), nullable=True),
        ]
    op.create_table(name, *columns, sa.PrimaryKeyConstraint("id", name=f"pk_{name}"))
    op.create_index(f"ix_{name}_uuid", name, ["uuid"], unique=True)
    # The relay's claim: an index range scan over pending rows of one bucket, in id order.
    op.create_index(
        f"ix_{name}_pending", name, ["bucket", "id"], postgresql_where=sa.text("status = 0")
    )
    # Ordered processing and the lookups by key (models.key_index).
    op.create_index(
        key_index_name(name, delivered=delivered_key_index),
        name,
        ["event_key", "id"],
        postgresql_where=key_index_where(delivered=delivered_key_index),
    )
    # Strict boxes' claim: is an older item of this key in backoff or failed? (see 0005)
    op.create_index(
        blocked_index_name(name), name, ["event_key", "id"], postgresql_where=BLOCKING_ROWS
    )
    # Retention and time filters. BRIN: rows arrive in created_at order, so a block-range
    # summary serves them at a fraction of a B-tree's cost per insert.
    op.create_index(f"ix_{name}_created_at", name, ["created_at"], postgresql_using="brin")


def switch_key_index(table: str, *, delivered: bool) -> None:
    """Give `table` the key index its class's `delivered_key_index` asks for: of every row
    (`delivered=True`) or of open rows only. Writes go on meanwhile: the new index is built
    with CREATE INDEX CONCURRENTLY, then the other dropped the same way, each in a
    transaction of its own (outside the revision's). Safe to run again after a failure: an
    index a failed concurrent build left invalid is dropped and built anew."""
    new = key_index_name(table, delivered=delivered)
    old = key_index_name(table, delivered=not delivered)
    predicate = key_index_where(delivered=delivered)
    where = "" if predicate is None else f" WHERE {predicate.text}"
    context = op.get_context()
    with context.autocommit_block():
        # Offline (`alembic upgrade --sql`) there is no database to ask: the script only
        # creates what is missing.
        valid = None if context.as_sql else _index_valid(new)
        if valid is False:
            op.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{new}"')
        if valid is not True:
            op.execute(
                f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{new}" ON "{table}" (event_key, id){where}'
            )
        op.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{old}"')


def _index_valid(name: str) -> bool | None:
    """Whether index `name` can be read (False: left by a failed concurrent build; None:
    there is none)."""
    query = sa.text("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(:name)")
    valid = op.get_bind().execute(query, {"name": f'"{name}"'}).scalar()
    return None if valid is None else bool(valid)
