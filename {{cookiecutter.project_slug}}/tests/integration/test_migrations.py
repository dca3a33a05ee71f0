from __future__ import annotations

from sqlalchemy import text

from {{ cookiecutter.package_name }}.container import Container


async def test_migrations_create_the_paired_tables_and_their_indexes(container: Container) -> None:
    async with container.engine().connect() as conn:
        tables = set(
            (
                await conn.execute(
                    text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
                )
            ).scalars()
        )
        indexes: dict[str, str] = dict(
            (
                await conn.execute(
                    text("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'")
                )
            ).all()
        )
    expected = {"{{ cookiecutter.outbox_item }}_outbox_items", "{{ cookiecutter.inbox_item }}_inbox_items", "alembic_version"}
{%- if cookiecutter.include_example_domain %}
    expected.add("orders")
{%- endif %}
    assert expected <= tables
    for table in ("{{ cookiecutter.outbox_item }}_outbox_items", "{{ cookiecutter.inbox_item }}_inbox_items"):
        assert "UNIQUE" in indexes[f"ix_{table}_uuid"]
        assert indexes[f"ix_{table}_pending"].endswith("(bucket, id) WHERE (status = 0)")
        # The example boxes' key index holds open rows only (0007, models.key_index).
        assert indexes[f"ix_{table}_open_key_id"].endswith(
            "(event_key, id) WHERE ((status = 0) OR (status = 1))"
        )
        assert f"ix_{table}_event_key_id" not in indexes
        assert "(created_at)" in indexes[f"ix_{table}_created_at"]
