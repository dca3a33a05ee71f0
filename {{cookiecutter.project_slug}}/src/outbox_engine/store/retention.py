"""Retention: delete delivered items after one period and failed, discarded or parked ones
after another, in small batches so no delete holds many locks or bloats one transaction.
Pending items are never deleted.

One worker at a time runs retention for a box (a transaction-level advisory lock).

The workers' own periodic runs are housekeeping, not operator actions: they write no audit
row (their counts are logged). A purge an operator asks for (`purge`, with an `actor`)
writes one audit row per box, in the transaction of its last batch, with the totals.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from outbox_engine.config.registry import Box
from outbox_engine.store.audit import write_audit
from outbox_engine.store.status import ItemStatus

log = logging.getLogger(__name__)

RETENTION_LOCK = 2_000_000


# Kept for as long as `retention.failed`: items that ended without being delivered.
ENDED_UNDELIVERED = (ItemStatus.FAILED, ItemStatus.DISCARDED, ItemStatus.PARKED)


@dataclass
class RetentionReport:
    delivered: int = 0
    # Failed, discarded and parked items (the name predates parking).
    failed_or_discarded: int = 0
    # False when another worker was purging the box, so this run stopped early.
    complete: bool = True


async def purge(
    engine: AsyncEngine, box: Box, pause_seconds: float = 0.0, *, actor: str | None = None
) -> RetentionReport:
    """Delete every item past its retention period, batch by batch.

    With `actor` (an operator's purge), the last batch's transaction also writes the audit
    row with the totals; batches committed before a crash are then not in the log.
    """
    config = box.config.retention
    report = RetentionReport()
    classes = (
        ("delivered", [int(ItemStatus.DELIVERED)], config.delivered),
        ("failed_or_discarded", [int(s) for s in ENDED_UNDELIVERED], config.failed),
    )
    selection = {
        "delivered_older_than_seconds": config.delivered.total_seconds(),
        "failed_discarded_parked_older_than_seconds": config.failed.total_seconds(),
    }
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
    for index, (field_name, statuses, age) in enumerate(classes):
        while True:
            async with engine.begin() as conn:
                if not (
                    await conn.execute(lock, {"ns": box.lock_namespace, "key": RETENTION_LOCK})
                ).scalar():
                    # Another worker is purging this box right now.
                    report.complete = False
                    if actor is not None:
                        await _audit(conn, actor, box, selection, report)
                    return report
                result = await conn.execute(
                    statement,
                    {"statuses": statuses, "age": age.total_seconds(), "limit": config.batch_size},
                )
                deleted = int(getattr(result, "rowcount", 0) or 0)
                setattr(report, field_name, getattr(report, field_name) + deleted)
                last = deleted < config.batch_size
                if last and index == len(classes) - 1 and actor is not None:
                    await _audit(conn, actor, box, selection, report)
            if last:
                break
            if pause_seconds:
                await asyncio.sleep(pause_seconds)
    if report.delivered or report.failed_or_discarded:
        log.info(
            "box %s: retention deleted %d delivered and %d failed/discarded/parked items",
            box.name,
            report.delivered,
            report.failed_or_discarded,
        )
    return report


async def _audit(
    conn: AsyncConnection,
    actor: str,
    box: Box,
    selection: dict[str, float],
    report: RetentionReport,
) -> None:
    detail = (
        f"deleted {report.delivered} delivered and "
        f"{report.failed_or_discarded} failed/discarded/parked items"
    )
    if not report.complete:
        detail += "; stopped early: another worker was purging this box"
    await write_audit(
        conn,
        actor=actor,
        action="purge",
        box=box.name,
        selection=selection,
        affected=report.delivered + report.failed_or_discarded,
        detail=detail,
    )
