"""Per-box statistics: depth by status, age of the oldest pending item, hot buckets and
keys (where a backlog piles up), the events that fail most with their last error, and the
box's pauses. The CLI prints them (`stats`), the admin API returns `as_json()`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.config.registry import Box
from outbox_engine.operations.errors import OpsError
from outbox_engine.store.pauses import list_pauses
from outbox_engine.store.stats import LAST_ERROR_CHARS, read_stats
from outbox_engine.store.stats import FailingEvent as Failing
from outbox_engine.store.status import ItemStatus

__all__ = ["LAST_ERROR_CHARS", "MAX_TOP", "BoxStats", "Failing", "box_stats"]

# Rows per top list; the admin API's `top` has the same bounds.
MAX_TOP = 100


@dataclass
class BoxStats:
    box: str
    kind: str
    table: str
    counts: dict[str, int]
    pending_due: int
    pending_waiting: int
    oldest_pending_age_seconds: float | None
    deepest_buckets: list[tuple[int, int]] = field(default_factory=list)
    deepest_keys: list[tuple[str, int]] = field(default_factory=list)
    failing: list[Failing] = field(default_factory=list)
    paused: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "box": self.box,
            "kind": self.kind,
            "table": self.table,
            "counts": self.counts,
            "pending_due": self.pending_due,
            "pending_waiting": self.pending_waiting,
            "oldest_pending_age_seconds": self.oldest_pending_age_seconds,
            "deepest_buckets": [{"bucket": b, "pending": n} for b, n in self.deepest_buckets],
            "deepest_keys": [{"key": k, "pending": n} for k, n in self.deepest_keys],
            "failing": [
                {
                    "event_name": f.event_name,
                    "failed": f.failed,
                    "retrying": f.retrying,
                    "last_error": f.last_error,
                }
                for f in self.failing
            ],
            "paused": self.paused,
        }


async def box_stats(engine: AsyncEngine, box: Box, top: int = 5) -> BoxStats:
    if not 0 <= top <= MAX_TOP:  # a negative LIMIT is an SQL error, a huge one a slow query
        raise OpsError(f"top must be 0-{MAX_TOP}")
    rows = await read_stats(engine, box.table_name, top)
    counts = {s.name.lower(): 0 for s in ItemStatus}
    waiting = 0
    age: float | None = None
    for count in rows.counts:
        counts[count.status.name.lower()] = count.rows
        if count.status is ItemStatus.PENDING:
            waiting = count.waiting
            age = round(count.oldest_age_seconds, 3)
    pauses = await list_pauses(engine, box.name)
    return BoxStats(
        box=box.name,
        kind=box.kind,
        table=box.table_name,
        counts=counts,
        pending_due=counts["pending"] - waiting,
        pending_waiting=waiting,
        oldest_pending_age_seconds=age,
        deepest_buckets=rows.buckets,
        deepest_keys=rows.keys,
        failing=rows.failing,
        paused=[p.target for p in pauses],
    )
