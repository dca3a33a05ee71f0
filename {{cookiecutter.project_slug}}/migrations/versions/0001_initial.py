"""Initial schema: the paired item tables{% if cookiecutter.include_example_domain %} and the orders table{% endif %}.

Revision ID: 0001
Revises:
Create Date: 2026-01-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def create_item_table(name: str, inbox: bool) -> None:
    """An outbox or inbox table with the engine's columns and indexes."""
    columns = [
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
    op.create_index(f"ix_{name}_event_key_id", name, ["event_key", "id"])
    op.create_index(f"ix_{name}_created_at", name, ["created_at"])


def upgrade() -> None:
    create_item_table("{{ cookiecutter.outbox_item }}_outbox_items", inbox=False)
    create_item_table("{{ cookiecutter.inbox_item }}_inbox_items", inbox=True)
{%- if cookiecutter.include_example_domain %}
    op.create_table(
        "orders",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), primary_key=True),
        sa.Column("customer_id", sa.String(255), nullable=False),
        sa.Column("amount", sa.Numeric(14, 2), nullable=False),
        sa.Column("status", sa.String(64), nullable=False, server_default=sa.text("'created'")),
        sa.Column("version", sa.Integer(), nullable=False, server_default=sa.text("1")),
        sa.Column("paid_amount", sa.Numeric(14, 2), nullable=False, server_default=sa.text("0")),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.PrimaryKeyConstraint("id", name="pk_orders"),
    )
{%- endif %}


def downgrade() -> None:
{%- if cookiecutter.include_example_domain %}
    op.drop_table("orders")
{%- endif %}
    op.drop_table("{{ cookiecutter.inbox_item }}_inbox_items")
    op.drop_table("{{ cookiecutter.outbox_item }}_outbox_items")
