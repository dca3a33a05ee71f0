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

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from outbox_engine.config.registry import BoxRegistry
from outbox_engine.sharding.replication import REPLICATED, item_rows
from outbox_engine.store.backfill import (
    WATERMARK_TABLE,
    advance_watermark,
    all_watermarks,
    finish_watermark,
    insert_rows,
    lock_watermark,
    next_rows,
    pending_depth,
    start_watermark,
)
from outbox_engine.store.wake import wake

log = logging.getLogger(__name__)


@dataclass
class BackfillReport:
    name: str
    emitted: int
    last_id: int
    finished: bool
    seconds: float


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
        await start_watermark(session, name)
    while True:
        # Yield to live traffic: no new backfill items while the box is backed up.
        waited = False
        while True:
            if await pending_depth(engine, box.table_name, max_pending) <= max_pending:
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
            mark = await lock_watermark(session, name)
            # Read FOR SHARE: a stale snapshot never wins over a newer item (store/backfill.py).
            rows = await next_rows(session, model, pk, mark.last_id, batch_size)
            if not rows:
                await finish_watermark(session, name)
                return BackfillReport(
                    name, mark.emitted, mark.last_id, True, time.monotonic() - started
                )
            for item_box, item_rows_ in item_rows(registry, ((row, "backfill") for row in rows)):
                await insert_rows(session, item_box.table, item_rows_)
            await wake(session, box.channel)
            await advance_watermark(session, name, getattr(rows[-1], pk.key), len(rows))
        emitted_now += len(rows)
        # The rate budget: never ahead of rate_per_second since this run started.
        ahead = emitted_now / rate_per_second - (time.monotonic() - started)
        if ahead > 0:
            await asyncio.sleep(ahead)


async def progress(engine: AsyncEngine) -> list[dict[str, Any]]:
    """Every backfill's watermark, for `stats`."""
    return await all_watermarks(engine)


__all__ = ["WATERMARK_TABLE", "BackfillReport", "backfill", "progress"]
