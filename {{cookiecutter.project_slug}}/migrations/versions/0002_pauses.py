"""Kill switch: the pauses of boxes, buckets and keys that running workers honour.

Revision ID: 0002
Revises: 0001
Create Date: 2026-01-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "outbox_pauses",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), primary_key=True),
        sa.Column("box", sa.Text(), nullable=False),
        sa.Column("bucket", sa.Integer(), nullable=True),
        sa.Column("event_key", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False, server_default=sa.text("''")),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.PrimaryKeyConstraint("id", name="pk_outbox_pauses"),
    )
    # One pause per target: the whole box (no bucket, no key), one bucket, or one key.
    op.create_index(
        "uq_outbox_pauses_target",
        "outbox_pauses",
        ["box", sa.text("coalesce(bucket, -1)"), sa.text("coalesce(event_key, '')")],
        unique=True,
    )


def downgrade() -> None:
    op.drop_table("outbox_pauses")
