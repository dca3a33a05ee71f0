"""The SQL of a box's statistics: rows by status (with the pending ones in backoff and the
oldest age), the buckets and keys with the most pending items, and the events that fail
most with their last error. One connection, four statements, nothing changed."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.store.status import ItemStatus

LAST_ERROR_CHARS = 300


@dataclass(frozen=True)
class StatusCount:
    status: ItemStatus
    rows: int
    waiting: int  # rows with next_attempt_at in the future
    oldest_age_seconds: float


@dataclass(frozen=True)
class FailingEvent:
    event_name: str
    failed: int
    retrying: int
    last_error: str | None


@dataclass
class StatsRows:
    counts: list[StatusCount] = field(default_factory=list)
    buckets: list[tuple[int, int]] = field(default_factory=list)  # bucket, pending
    keys: list[tuple[str, int]] = field(default_factory=list)  # key, pending
    failing: list[FailingEvent] = field(default_factory=list)


def _queries(table: str) -> tuple[TextClause, TextClause, TextClause, TextClause]:
    pending = int(ItemStatus.PENDING)
    failed = int(ItemStatus.FAILED)
    counts = text(
        f"""
        SELECT status, count(*) AS n,
               count(*) FILTER (WHERE next_attempt_at > now()) AS waiting,
               extract(epoch FROM now() - min(created_at)) AS age
        FROM {table} GROUP BY status
        """
    )
    buckets = text(
        f"SELECT bucket, count(*) AS n FROM {table} WHERE status = {pending} "
        "GROUP BY bucket ORDER BY n DESC, bucket LIMIT :top"
    )
    keys = text(
        f"SELECT event_key, count(*) AS n FROM {table} WHERE status = {pending} "
        "GROUP BY event_key ORDER BY n DESC, event_key LIMIT :top"
    )
    failing = text(
        f"""
        SELECT f.event_name, f.failed, f.retrying, left(t.last_error, {LAST_ERROR_CHARS})
               AS last_error
        FROM (
            SELECT event_name, count(*) FILTER (WHERE status = {failed}) AS failed,
                   count(*) FILTER (WHERE status = {pending}) AS retrying, max(id) AS last_id
            FROM {table}
            WHERE status = {failed} OR (status = {pending} AND errors_count > 0)
            GROUP BY event_name ORDER BY count(*) DESC, event_name LIMIT :top
        ) f JOIN {table} t ON t.id = f.last_id
        ORDER BY f.failed + f.retrying DESC, f.event_name
        """
    )
    return counts, buckets, keys, failing


async def read_stats(engine: AsyncEngine, table: str, top: int) -> StatsRows:
    """The statistics of `table`, each top list at most `top` rows (0-100: the caller checks)."""
    counts_q, buckets_q, keys_q, failing_q = _queries(table)
    found = StatsRows()
    async with engine.connect() as conn:
        for row in (await conn.execute(counts_q)).mappings():
            found.counts.append(
                StatusCount(
                    ItemStatus(row["status"]), int(row["n"]), int(row["waiting"]), float(row["age"])
                )
            )
        found.buckets = [
            (int(r[0]), int(r[1])) for r in await conn.execute(buckets_q, {"top": top})
        ]
        found.keys = [(str(r[0]), int(r[1])) for r in await conn.execute(keys_q, {"top": top})]
        found.failing = [
            FailingEvent(r.event_name, int(r.failed), int(r.retrying), r.last_error)
            for r in await conn.execute(failing_q, {"top": top})
        ]
        await conn.rollback()
    return found
