"""Per-box statistics: depth by status, age of the oldest pending item, hot buckets and
keys (where a backlog piles up), and the events that fail most with their last error."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.config.registry import Box
from outbox_engine.store.pauses import list_pauses
from outbox_engine.store.status import ItemStatus

from .errors import OpsError

LAST_ERROR_CHARS = 300
# Rows per top list; the admin API's `top` has the same bounds.
MAX_TOP = 100


@dataclass
class Failing:
    event_name: str
    failed: int
    retrying: int
    last_error: str | None


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
            "failing": [f.__dict__ for f in self.failing],
            "paused": self.paused,
        }


def _queries(table: str) -> dict[str, Any]:
    pending = int(ItemStatus.PENDING)
    failed = int(ItemStatus.FAILED)
    return {
        "counts": text(
            f"""
            SELECT status, count(*) AS n,
                   count(*) FILTER (WHERE next_attempt_at > now()) AS waiting,
                   extract(epoch FROM now() - min(created_at)) AS age
            FROM {table} GROUP BY status
            """
        ),
        "buckets": text(
            f"SELECT bucket, count(*) AS n FROM {table} WHERE status = {pending} "
            "GROUP BY bucket ORDER BY n DESC, bucket LIMIT :top"
        ),
        "keys": text(
            f"SELECT event_key, count(*) AS n FROM {table} WHERE status = {pending} "
            "GROUP BY event_key ORDER BY n DESC, event_key LIMIT :top"
        ),
        "failing": text(
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
        ),
    }


async def box_stats(engine: AsyncEngine, box: Box, top: int = 5) -> BoxStats:
    if not 0 <= top <= MAX_TOP:  # a negative LIMIT is an SQL error, a huge one a slow query
        raise OpsError(f"top must be 0-{MAX_TOP}")
    queries = _queries(box.table_name)
    counts = {s.name.lower(): 0 for s in ItemStatus}
    waiting = 0
    age: float | None = None
    async with engine.connect() as conn:
        for row in (await conn.execute(queries["counts"])).mappings():
            status = ItemStatus(row["status"])
            counts[status.name.lower()] = int(row["n"])
            if status is ItemStatus.PENDING:
                waiting = int(row["waiting"])
                age = round(float(row["age"]), 3)
        buckets = [
            (int(r[0]), int(r[1])) for r in await conn.execute(queries["buckets"], {"top": top})
        ]
        keys = [(str(r[0]), int(r[1])) for r in await conn.execute(queries["keys"], {"top": top})]
        failing = [
            Failing(r.event_name, int(r.failed), int(r.retrying), r.last_error)
            for r in await conn.execute(queries["failing"], {"top": top})
        ]
        await conn.rollback()
    pauses = await list_pauses(engine, box.name)
    return BoxStats(
        box=box.name,
        kind=box.kind,
        table=box.table_name,
        counts=counts,
        pending_due=counts["pending"] - waiting,
        pending_waiting=waiting,
        oldest_pending_age_seconds=age,
        deepest_buckets=buckets,
        deepest_keys=keys,
        failing=failing,
        paused=[p.target for p in pauses],
    )


def render(stats: list[BoxStats]) -> str:
    """Stats as text for a terminal."""
    lines: list[str] = []
    for s in stats:
        age = (
            "-" if s.oldest_pending_age_seconds is None else f"{s.oldest_pending_age_seconds:.1f}s"
        )
        counts = "  ".join(f"{name} {n}" for name, n in s.counts.items())
        lines.append(f"{s.kind} {s.box} ({s.table})")
        lines.append(f"  {counts}")
        lines.append(
            f"  pending: {s.pending_due} due, {s.pending_waiting} in backoff; oldest {age}"
        )
        if s.paused:
            lines.append(f"  PAUSED: {'; '.join(s.paused)}")
        if s.deepest_buckets:
            lines.append(
                "  deepest buckets: " + ", ".join(f"{b} ({n})" for b, n in s.deepest_buckets)
            )
        if s.deepest_keys:
            lines.append("  deepest keys: " + ", ".join(f"{k!r} ({n})" for k, n in s.deepest_keys))
        for f in s.failing:
            error = (f.last_error or "").splitlines()[0][:120] if f.last_error else "-"
            lines.append(
                f"  failing {f.event_name}: {f.failed} failed, {f.retrying} retrying; last: {error}"
            )
    return "\n".join(lines)
