"""The SQL of reading items for an operator: a page of a box's selected items in id order,
or one item with every column."""

from __future__ import annotations

from typing import Any

from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.store.selection import ItemFilter, where_clause

# What a page shows of each item: no payload or headers, the last error cut short.
LIST_COLUMNS = (
    "id, uuid, event_name, event_key, bucket, status, errors_count, "
    "left(last_error, 300) AS last_error, next_attempt_at, created_at, processed_at"
)


async def read_page(
    engine: AsyncEngine, table: str, selection: ItemFilter, *, after_id: int, limit: int
) -> list[dict[str, Any]]:
    """At most `limit` selected rows (LIST_COLUMNS) with ids above `after_id`, in id order."""
    where, params = where_clause(selection)
    statement = text(
        f"SELECT {LIST_COLUMNS} FROM {table} WHERE {where} AND id > :after_id "
        "ORDER BY id LIMIT :limit"
    )
    async with engine.connect() as conn:
        rows = (
            await conn.execute(statement, {**params, "after_id": after_id, "limit": limit})
        ).mappings()
        page = [dict(row) for row in rows]
        await conn.rollback()
    return page


async def read_item(engine: AsyncEngine, table: str, item_id: int) -> RowMapping | None:
    """Every column of item `item_id`, or None."""
    statement = text(f"SELECT * FROM {table} WHERE id = :id")
    async with engine.connect() as conn:
        row = (await conn.execute(statement, {"id": item_id})).mappings().first()
        await conn.rollback()
    return row
