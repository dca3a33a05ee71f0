"""The SQL of an operator's purge: delete the rows past their retention period in
id-ordered, locked batches, under the box's retention lock.

The workers' periodic retention (store/retention.py) deletes the same rows; both take the
box's transaction-level advisory lock (`RETENTION_LOCK`), so one runs at a time per box.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from outbox_engine.store.retention import ENDED_UNDELIVERED, RETENTION_LOCK
from outbox_engine.store.status import ItemStatus

_DELIVERED = int(ItemStatus.DELIVERED)
_LOCK = text("SELECT pg_try_advisory_xact_lock(:ns, :key)")


@dataclass(frozen=True)
class PurgeBatch:
    """One batch: rows picked, how many of the deleted were delivered or ended otherwise,
    and the id range it covered (None when it picked nothing)."""

    picked: int
    delivered: int
    ended: int
    first: int | None
    last: int | None


def _where(delivered: timedelta, failed: timedelta) -> tuple[str, dict[str, Any]]:
    return (
        f"((t.status = {_DELIVERED} AND t.created_at < now() - make_interval(secs => :kept)) "
        "OR (t.status = ANY(CAST(:ended AS smallint[])) "
        "AND t.created_at < now() - make_interval(secs => :kept_failed)))",
        {
            "kept": delivered.total_seconds(),
            "kept_failed": failed.total_seconds(),
            "ended": [int(s) for s in ENDED_UNDELIVERED],
        },
    )


async def count_expired(
    engine: AsyncEngine, table: str, delivered: timedelta, failed: timedelta, after_id: int = 0
) -> int:
    """Rows past retention (delivered older than `delivered`, failed/discarded/parked older
    than `failed`) with ids above `after_id`."""
    where, params = _where(delivered, failed)
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(f"SELECT count(*) FROM {table} AS t WHERE {where} AND t.id > :after"),
            {**params, "after": after_id},
        )
        await conn.rollback()
        return int(rows.scalar_one())


async def try_retention_lock(conn: AsyncConnection, lock_namespace: int) -> bool:
    """Take the box's retention lock for `conn`'s transaction; False when another holds it."""
    held = await conn.execute(_LOCK, {"ns": lock_namespace, "key": RETENTION_LOCK})
    return bool(held.scalar())


async def delete_expired_batch(
    conn: AsyncConnection,
    table: str,
    delivered: timedelta,
    failed: timedelta,
    *,
    after_id: int,
    limit: int,
) -> PurgeBatch:
    """Lock and delete the first `limit` expired rows with ids above `after_id` (id order),
    in `conn`'s open transaction."""
    where, params = _where(delivered, failed)
    statement = text(
        f"""
        WITH picked AS (
            SELECT t.id FROM {table} AS t WHERE {where} AND t.id > :after
            ORDER BY t.id LIMIT :limit FOR UPDATE
        ), gone AS (
            DELETE FROM {table} AS t USING picked WHERE t.id = picked.id RETURNING t.status
        )
        SELECT (SELECT count(*) FROM picked) AS picked, (SELECT min(id) FROM picked) AS first,
               (SELECT max(id) FROM picked) AS last,
               (SELECT count(*) FROM gone WHERE status = {_DELIVERED}) AS delivered,
               (SELECT count(*) FROM gone WHERE status <> {_DELIVERED}) AS ended
        """
    )
    row = (await conn.execute(statement, {**params, "after": after_id, "limit": limit})).one()
    picked = int(row.picked)
    return PurgeBatch(
        picked,
        int(row.delivered),
        int(row.ended),
        int(row.first) if picked else None,
        int(row.last) if picked else None,
    )
