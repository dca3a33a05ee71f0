"""Per-box statistics: depth by status, age of the oldest pending item, hot buckets and
keys (where a backlog piles up), the events that fail most with their last error, and the
box's pauses. The CLI prints them (`stats`), the admin API returns `as_json()`.

An outbox box also says who relays it (`relay`); for a box Debezium relays, `capture` holds
what matters instead of the worker's figures: whether the capture trigger is there, the
replication slot (exists, streaming, bytes of WAL it holds back), the capture rows, and the
problems `debezium-status` would report (debezium/status.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.config.registry import Box
from outbox_engine.operations.errors import OpsError
from outbox_engine.store.capture_reads import capture_rows
from outbox_engine.store.pauses import list_pauses
from outbox_engine.store.stats import LAST_ERROR_CHARS, read_stats
from outbox_engine.store.stats import FailingEvent as Failing
from outbox_engine.store.status import ItemStatus

if TYPE_CHECKING:
    from outbox_engine.debezium.connector import DebeziumNames

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
    relay: str | None = None  # outbox boxes: worker | debezium
    capture: dict[str, Any] | None = None  # a box Debezium relays: see the module docstring

    def as_json(self) -> dict[str, Any]:
        return {
            "box": self.box,
            "kind": self.kind,
            "relay": self.relay,
            "capture": self.capture,
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


async def box_stats(
    engine: AsyncEngine, box: Box, top: int = 5, names: DebeziumNames | None = None
) -> BoxStats:
    """The box's statistics; `names` (the service's Debezium names) fills `capture` for a
    box Debezium relays."""
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
        relay=("debezium" if box.relayed_by_debezium else "worker")
        if box.kind == "outbox"
        else None,
        capture=await capture_json(engine, box, names)
        if box.relayed_by_debezium and names is not None
        else None,
    )


async def capture_json(engine: AsyncEngine, box: Box, names: DebeziumNames) -> dict[str, Any]:
    """The capture status of a box Debezium relays, as `stats` shows it."""
    from outbox_engine.debezium.status import debezium_status

    (status,) = await debezium_status(engine, [box], names)
    async with engine.connect() as conn:
        rows = (await capture_rows(conn)).get(box.name)
        await conn.rollback()
    slot = status.slot
    return {
        "trigger": status.captured,
        "topic": status.topic,
        "slot": names.slot,
        "slot_exists": slot.exists,
        "slot_active": slot.active,
        "lag_bytes": slot.lag_bytes,
        "confirmed_flush_lsn": slot.confirmed_flush_lsn,
        "capture_rows": rows.rows if rows else 0,
        "oldest_capture_age_seconds": rows.oldest_age_seconds if rows else None,
        "problems": list(status.problems),
    }
