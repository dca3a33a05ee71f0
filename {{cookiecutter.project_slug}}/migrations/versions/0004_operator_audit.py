"""Operator audit: who changed which items or pauses, when, with what selection, how many.

One row per operator action (retry, discard, replay, purge, park, pause, resume) and per
batch of items a worker parks (`poisoned_head: park`), written in the transaction of the
change; see outbox_engine/store/audit.py.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "outbox_audit",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("box", sa.Text(), nullable=True),
        sa.Column(
            "selection",
            postgresql.JSONB(),
            nullable=False,
            server_default=sa.text("'{}'::jsonb"),
        ),
        sa.Column("affected", sa.Integer(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_outbox_audit"),
    )
    # Reading the log by time ("what happened yesterday between 10 and 11").
    op.create_index("ix_outbox_audit_at", "outbox_audit", ["at"])


def downgrade() -> None:
    op.drop_table("outbox_audit")
