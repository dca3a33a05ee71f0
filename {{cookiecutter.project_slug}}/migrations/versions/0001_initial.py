"""Initial schema: the paired item tables{% if cookiecutter.include_example_domain %} and the orders table{% endif %}.

Revision ID: 0001
Revises:
Create Date: 2026-01-01
"""

from collections.abc import Sequence

{% if cookiecutter.include_example_domain -%}
import sqlalchemy as sa
{% endif -%}
from alembic import op

from outbox_engine.store.schema import create_item_table

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


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
