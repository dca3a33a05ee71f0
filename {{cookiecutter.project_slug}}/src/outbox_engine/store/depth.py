"""A box's backlog, for the depth gauges: pending items, the age of the oldest, and the
pending items of its deepest bucket.

Read by the worker every `depth_interval` (relay/worker.py); kept here because every SQL
statement of the engine lives in store/, next to the status it counts (store/status.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.store.status import ItemStatus

DEPTH_SQL = (
    "SELECT count(*), EXTRACT(EPOCH FROM now() - min(created_at)) FROM {table} "
    f"WHERE status = {int(ItemStatus.PENDING)}"
)
DEEPEST_SQL = (
    "SELECT count(*) FROM {table} "
    f"WHERE status = {int(ItemStatus.PENDING)} GROUP BY bucket ORDER BY 1 DESC LIMIT 1"
)


@dataclass(frozen=True)
class Depth:
    """Pending items, seconds since the oldest pending one was created (0 when none), and
    the pending items of the deepest bucket."""

    pending: int
    oldest_seconds: float
    deepest_bucket: int


async def sample_depth(engine: AsyncEngine, table: str) -> Depth:
    """Two statements on one connection; raises what the database raises."""
    async with engine.connect() as conn:
        row = (await conn.execute(text(DEPTH_SQL.format(table=table)))).one()
        deepest = (await conn.execute(text(DEEPEST_SQL.format(table=table)))).scalar()
    return Depth(int(row[0]), float(row[1] or 0.0), int(deepest or 0))
