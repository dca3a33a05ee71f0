"""Backfill: re-emit an item for every row of a replicated model (after a schema change, or
to seed a new consumer), in batches, under a rate budget, yielding to live traffic, and
resumable: each batch's items and the watermark commit together, so a killed backfill
resumes where it stopped and emits no row twice.

A backfill never lets a stale snapshot win over a newer item of the same object: each batch
reads its rows FOR SHARE, so a concurrent update is either read (it committed first) or
waits and gets a larger item id than the backfill's item. Its items are ordinary items: the
worker delivers them under the box's strict order, pauses and bucket ownership.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from outbox_engine.config.registry import BoxRegistry
from outbox_engine.sharding.replication import REPLICATED, item_rows

log = logging.getLogger(__name__)

WATERMARK_TABLE = "outbox_backfills"


@dataclass
class BackfillReport:
    name: str
    emitted: int
    last_id: int
    finished: bool
    seconds: float


async def _pending_depth(engine: AsyncEngine, table: str, cap: int) -> int:
    async with engine.connect() as conn:
        query = text(
            f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE status = 0 LIMIT :cap) AS p"
        )
        return int((await conn.execute(query, {"cap": cap + 1})).scalar_one())


async def backfill(
    session_factory: async_sessionmaker[AsyncSession],
    engine: AsyncEngine,
    registry: BoxRegistry,
    model: type[Any],
    *,
    name: str | None = None,
    batch_size: int = 1000,
    rate_per_second: float = 5000.0,
    max_pending: int = 20_000,
) -> BackfillReport:
    """Emit items for every row of `model` with a primary key above the stored watermark."""
    if model not in REPLICATED:
        raise ValueError(f"{model.__name__} is not a replicated model (mark it with @replicated)")
    if batch_size < 1 or rate_per_second <= 0:
        raise ValueError("batch_size must be >= 1 and rate_per_second > 0")
    name = name or f"{model.__tablename__}"
    replication = REPLICATED[model]
    box = registry.for_item_class(replication.item_class)
    pk = model.__mapper__.primary_key[0]
    started = time.monotonic()
    emitted_now = 0
    async with session_factory() as session, session.begin():
        await session.execute(
            text(
                f"INSERT INTO {WATERMARK_TABLE} (name, last_id, emitted) VALUES (:name, 0, 0) "
                "ON CONFLICT (name) DO NOTHING"
            ),
            {"name": name},
        )
    while True:
        # Yield to live traffic: no new backfill items while the box is backed up.
        waited = False
        while True:
            if await _pending_depth(engine, box.table_name, max_pending) <= max_pending:
                break
            if not waited:
                log.info(
                    "backfill %s: box %s has over %d pending items; waiting",
                    name,
                    box.name,
                    max_pending,
                )
                waited = True
            await asyncio.sleep(0.5)
        async with session_factory() as session, session.begin():
            mark = (
                await session.execute(
                    text(
                        f"SELECT last_id, emitted FROM {WATERMARK_TABLE} WHERE name = :name FOR UPDATE"
                    ),
                    {"name": name},
                )
            ).one()
            rows = list(
                (
                    await session.execute(
                        select(model)
                        .where(pk > mark.last_id)
                        .order_by(pk)
                        .limit(batch_size)
                        # Locked until this batch's items commit: a concurrent update of a
                        # row either commits first (and is read here) or waits and emits its
                        # item after ours. A snapshot read without the lock could be older
                        # than an update whose item got a smaller id, and coalescing (newest
                        # id wins) would then deliver the stale snapshot last.
                        .with_for_update(read=True)
                    )
                )
                .scalars()
                .all()
            )
            if not rows:
                await session.execute(
                    text(
                        f"UPDATE {WATERMARK_TABLE} SET finished_at = now(), updated_at = now() WHERE name = :name"
                    ),
                    {"name": name},
                )
                return BackfillReport(
                    name, int(mark.emitted), int(mark.last_id), True, time.monotonic() - started
                )
            for item_box, item_rows_ in item_rows(registry, ((row, "backfill") for row in rows)):
                await session.execute(insert(item_box.table), item_rows_)
            await session.execute(text("SELECT pg_notify(:channel, '')"), {"channel": box.channel})
            last_id = getattr(rows[-1], pk.key)
            await session.execute(
                text(
                    f"UPDATE {WATERMARK_TABLE} SET last_id = :last, emitted = emitted + :n, "
                    "updated_at = now(), finished_at = NULL WHERE name = :name"
                ),
                {"last": last_id, "n": len(rows), "name": name},
            )
        emitted_now += len(rows)
        # The rate budget: never ahead of rate_per_second since this run started.
        ahead = emitted_now / rate_per_second - (time.monotonic() - started)
        if ahead > 0:
            await asyncio.sleep(ahead)


async def progress(engine: AsyncEngine) -> list[dict[str, Any]]:
    """Every backfill's watermark, for `stats`."""
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                f"SELECT name, last_id, emitted, started_at, updated_at, finished_at "
                f"FROM {WATERMARK_TABLE} ORDER BY name"
            )
        )
        return [dict(row._mapping) for row in rows]


__all__ = ["BackfillReport", "backfill", "progress"]
