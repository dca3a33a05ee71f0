"""Backfill watermarks.

Revision ID: 0003
Revises: 0002
Create Date: 2026-01-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "outbox_backfills",
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("last_id", sa.BigInteger(), nullable=False, server_default=sa.text("0")),
        sa.Column("emitted", sa.BigInteger(), nullable=False, server_default=sa.text("0")),
        sa.Column(
            "started_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("outbox_backfills")
