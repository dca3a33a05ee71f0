"""The SQL of a backfill: its watermark row (`outbox_backfills`: the last primary key
emitted and how many items), the next batch of a replicated model's rows, and the box depth
it yields to.

The watermark is read FOR UPDATE and advanced in the transaction that inserts the batch's
items, so a killed backfill resumes after the last committed batch and emits no row twice.
The batch's rows are read FOR SHARE (see `next_rows`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, insert, select, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from outbox_engine.store.status import ItemStatus

WATERMARK_TABLE = "outbox_backfills"

_START = text(
    f"INSERT INTO {WATERMARK_TABLE} (name, last_id, emitted) VALUES (:name, 0, 0) "
    "ON CONFLICT (name) DO NOTHING"
)
_LOCK = text(f"SELECT last_id, emitted FROM {WATERMARK_TABLE} WHERE name = :name FOR UPDATE")
_READ = text(f"SELECT last_id, emitted FROM {WATERMARK_TABLE} WHERE name = :name")
_FINISH = text(
    f"UPDATE {WATERMARK_TABLE} SET finished_at = now(), updated_at = now() WHERE name = :name"
)
_ADVANCE = text(
    f"UPDATE {WATERMARK_TABLE} SET last_id = :last, emitted = emitted + :n, "
    "updated_at = now(), finished_at = NULL WHERE name = :name"
)
_ALL = text(
    "SELECT name, last_id, emitted, started_at, updated_at, finished_at "
    f"FROM {WATERMARK_TABLE} ORDER BY name"
)


@dataclass(frozen=True)
class Watermark:
    last_id: int  # the primary key of the last row emitted (0: none yet)
    emitted: int


async def start_watermark(session: AsyncSession, name: str) -> None:
    """Create the watermark of backfill `name` at 0 unless it exists (then it resumes)."""
    await session.execute(_START, {"name": name})


async def lock_watermark(session: AsyncSession, name: str) -> Watermark:
    """The watermark, locked until the session's transaction ends."""
    mark = (await session.execute(_LOCK, {"name": name})).one()
    return Watermark(int(mark.last_id), int(mark.emitted))


async def advance_watermark(session: AsyncSession, name: str, last_id: Any, emitted: int) -> None:
    """Record a batch: `last_id` its last primary key, `emitted` its rows."""
    await session.execute(_ADVANCE, {"last": last_id, "n": emitted, "name": name})


async def finish_watermark(session: AsyncSession, name: str) -> None:
    """Mark backfill `name` finished (no row left above its watermark)."""
    await session.execute(_FINISH, {"name": name})


async def read_watermark(engine: AsyncEngine, name: str) -> Watermark | None:
    """The committed watermark of backfill `name` (None: never started); takes no lock."""
    async with engine.connect() as conn:
        row = (await conn.execute(_READ, {"name": name})).first()
        await conn.rollback()
    return None if row is None else Watermark(int(row[0]), int(row[1]))


async def all_watermarks(engine: AsyncEngine) -> list[dict[str, Any]]:
    """Every backfill's watermark row, by name."""
    async with engine.connect() as conn:
        return [dict(row._mapping) for row in await conn.execute(_ALL)]


async def next_rows(
    session: AsyncSession, model: type[Any], pk: Any, after: Any, limit: int
) -> list[Any]:
    """The next `limit` rows of `model` with a primary key above `after`, in key order.

    Locked FOR SHARE until the batch's items commit: a concurrent update of a row either
    commits first (and is read here) or waits and emits its item after ours. A snapshot
    read without the lock could be older than an update whose item got a smaller id, and
    coalescing (newest id wins) would then deliver the stale snapshot last.
    """
    query = select(model).where(pk > after).order_by(pk).limit(limit).with_for_update(read=True)
    return list((await session.execute(query)).scalars().all())


async def insert_rows(session: AsyncSession, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert item rows (as replication builds them) into a box's table."""
    await session.execute(insert(table), rows)


async def pending_depth(engine: AsyncEngine, table: str, cap: int) -> int:
    """Pending items of `table`, counted up to `cap + 1` (enough to tell "over cap")."""
    query = text(
        f"SELECT count(*) FROM (SELECT 1 FROM {table} "
        f"WHERE status = {int(ItemStatus.PENDING)} LIMIT :cap) AS p"
    )
    async with engine.connect() as conn:
        return int((await conn.execute(query, {"cap": cap + 1})).scalar_one())
