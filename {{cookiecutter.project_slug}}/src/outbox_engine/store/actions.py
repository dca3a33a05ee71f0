"""The SQL of the operator's status changes (retry, discard, park, replay): count the
selected rows, change them in one UPDATE, or change them in id-ordered, locked batches.

Each change is a fixed assignment list per action (`ASSIGNMENTS`), restricted by the
selection's WHERE clause (store/selection.py); the caller names the statuses the action
applies to in that selection, so a row in another state is not touched. A batch locks the
rows it picks (FOR UPDATE) so a row a worker changed in the meantime is re-checked against
the selection. Audit rows and the NOTIFY go in the same transaction (store/audit.py,
store/wake.py), written by operations/.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from outbox_engine.store.selection import ItemFilter, where_clause
from outbox_engine.store.status import ItemStatus

ActionName = Literal["retry", "discard", "park", "replay"]

_PENDING = int(ItemStatus.PENDING)
ASSIGNMENTS: dict[ActionName, str] = {
    # Due now, attempts reset; the last error stays for inspection.
    "retry": f"status = {_PENDING}, errors_count = 0, next_attempt_at = NULL, processed_at = NULL",
    "discard": f"status = {int(ItemStatus.DISCARDED)}, processed_at = now(), next_attempt_at = NULL",
    "park": (
        f"status = {int(ItemStatus.PARKED)}, processed_at = coalesce(processed_at, now()), "
        "next_attempt_at = NULL"
    ),
    "replay": (
        f"status = {_PENDING}, errors_count = 0, next_attempt_at = NULL, processed_at = NULL, "
        "last_error = NULL"
    ),
}


@dataclass(frozen=True)
class Batch:
    """One committed batch: rows picked and changed, and the id range it covered (None
    when it picked nothing)."""

    picked: int
    changed: int
    first: int | None
    last: int | None


async def count_selected(
    engine: AsyncEngine, table: str, selection: ItemFilter, after_id: int = 0
) -> int:
    """How many rows of `table` the selection holds now, with ids above `after_id`."""
    where, params = where_clause(selection)
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(f"SELECT count(*) FROM {table} WHERE {where} AND id > :after_id"),
            {**params, "after_id": after_id},
        )
        await conn.rollback()
        return int(rows.scalar_one())


async def change_selected(
    conn: AsyncConnection, table: str, action: ActionName, selection: ItemFilter
) -> int:
    """Apply the action's assignments to every selected row in one UPDATE (in `conn`'s open
    transaction); the number of rows changed."""
    where, params = where_clause(selection)
    result = await conn.execute(
        text(f"UPDATE {table} SET {ASSIGNMENTS[action]} WHERE {where}"), params
    )
    return int(getattr(result, "rowcount", 0) or 0)


def _batch_statement(table: str, action: ActionName, where: str) -> str:
    return f"""
        WITH picked AS (
            SELECT t.id FROM {table} AS t WHERE {where} AND t.id > :after_id
            ORDER BY t.id LIMIT :limit FOR UPDATE
        ), changed AS (
            UPDATE {table} AS t SET {ASSIGNMENTS[action]} FROM picked
            WHERE t.id = picked.id RETURNING t.id
        )
        SELECT (SELECT count(*) FROM picked) AS picked, (SELECT min(id) FROM picked) AS first,
               (SELECT max(id) FROM picked) AS last, (SELECT count(*) FROM changed) AS changed
        """


async def change_batch(
    conn: AsyncConnection,
    table: str,
    action: ActionName,
    selection: ItemFilter,
    *,
    after_id: int,
    limit: int,
) -> Batch:
    """Lock the first `limit` selected rows with ids above `after_id` (id order) and apply
    the action to them, in `conn`'s open transaction."""
    where, params = where_clause(selection, "t")
    statement = text(_batch_statement(table, action, where))
    row = (await conn.execute(statement, {**params, "after_id": after_id, "limit": limit})).one()
    picked = int(row.picked)
    return Batch(
        picked,
        int(row.changed),
        int(row.first) if picked else None,
        int(row.last) if picked else None,
    )
