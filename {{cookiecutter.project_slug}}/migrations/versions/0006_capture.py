"""The Debezium relay's tables and trigger function (docs/debezium.md).

`outbox_capture` holds each item of a box relayed by Debezium as the message the worker
would send (Debezium's outbox router reads it from the WAL), and the connector's
heartbeats. The functions are created here; the trigger that uses
them is added to a box's table by `debezium-switch`, not by a migration, because which
boxes Debezium relays is configuration.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from outbox_engine.store.capture import CAPTURE_FUNCTIONS_SQL, DROP_FUNCTIONS_SQL, HEADER_COLUMNS

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "outbox_capture",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), primary_key=True),
        sa.Column("box", sa.Text(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), nullable=False),
        sa.Column("message_id", sa.Text(), nullable=False),
        sa.Column("topic", sa.Text(), nullable=False),
        sa.Column("event_key", sa.Text(), nullable=False),
        sa.Column("event_name", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Text(), nullable=False),
        *(sa.Column(column, sa.Text(), nullable=True) for _, column in HEADER_COLUMNS),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column(
            "captured_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.PrimaryKeyConstraint("id", name="pk_outbox_capture"),
    )
    op.create_index(
        "ix_outbox_capture_captured_at",
        "outbox_capture",
        ["captured_at"],
        postgresql_using="brin",
    )
    for statement in CAPTURE_FUNCTIONS_SQL:
        op.execute(statement)


def downgrade() -> None:
    for statement in DROP_FUNCTIONS_SQL:
        op.execute(statement)
    op.drop_index("ix_outbox_capture_captured_at", table_name="outbox_capture")
    op.drop_table("outbox_capture")
