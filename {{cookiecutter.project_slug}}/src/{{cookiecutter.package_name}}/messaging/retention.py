"""Retention: delete delivered items after one period and failed/discarded ones after
another, in small batches so no delete holds many locks or bloats one transaction.
Pending items are never deleted.

One worker at a time runs retention for a box (a transaction-level advisory lock).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from .registry import Box
from .status import ItemStatus

log = logging.getLogger(__name__)

RETENTION_LOCK = 2_000_000


@dataclass
class RetentionReport:
    delivered: int = 0
    failed_or_discarded: int = 0


async def purge(engine: AsyncEngine, box: Box, pause_seconds: float = 0.0) -> RetentionReport:
    """Delete every item past its retention period, batch by batch."""
    config = box.config.retention
    report = RetentionReport()
    classes = (
        ("delivered", [int(ItemStatus.DELIVERED)], config.delivered),
        ("failed_or_discarded", [int(ItemStatus.FAILED), int(ItemStatus.DISCARDED)], config.failed),
    )
    statement = text(
        f"""
        DELETE FROM {box.table_name} WHERE id IN (
            SELECT id FROM {box.table_name}
            WHERE status = ANY(CAST(:statuses AS smallint[]))
              AND created_at < now() - make_interval(secs => :age)
            LIMIT :limit
        )
        """
    )
    lock = text("SELECT pg_try_advisory_xact_lock(:ns, :key)")
    for field_name, statuses, age in classes:
        while True:
            async with engine.begin() as conn:
                if not (
                    await conn.execute(lock, {"ns": box.lock_namespace, "key": RETENTION_LOCK})
                ).scalar():
                    return report  # another worker is purging this box right now
                result = await conn.execute(
                    statement,
                    {"statuses": statuses, "age": age.total_seconds(), "limit": config.batch_size},
                )
            deleted = int(getattr(result, "rowcount", 0) or 0)
            setattr(report, field_name, getattr(report, field_name) + deleted)
            if deleted < config.batch_size:
                break
            if pause_seconds:
                await asyncio.sleep(pause_seconds)
    if report.delivered or report.failed_or_discarded:
        log.info(
            "box %s: retention deleted %d delivered and %d failed/discarded items",
            box.name,
            report.delivered,
            report.failed_or_discarded,
        )
    return report
