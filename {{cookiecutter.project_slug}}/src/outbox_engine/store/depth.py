"""A box's backlog, for the depth gauges: pending items, the age of the oldest, and the
pending items of its deepest bucket.

Read by each worker every `depth_interval` (relay/worker.py); kept here because every SQL
statement of the engine lives in store/, next to the status it counts (store/status.py).

Two statements, both on the pending index, on a connection with the relay's session
settings (no sequential or bitmap scan, whatever plan a pageless table left cached):

* the pending items of each bucket, one pass over the pending index (the total and the
  deepest bucket both come from it);
* the oldest: each non-empty bucket's first pending item by id, one index descent each.

Until 2026-11-30 the gauges took two passes and the oldest item's age read every pending
row's heap tuple (`min(created_at)`): on a settled backlog of 100,000 items of 1 KB, 101,079
buffers and 60 ms a sample, growing with the backlog, every 15 s in every worker; now one
pass over the index and a descent per bucket, 604 buffers and 6.2 ms (docs/performance.md).

"The oldest" is the oldest by id within each bucket: an item whose transaction began
before that of a lower id in its bucket but committed after it is older by the difference,
which is the length of a transaction, not of a backlog.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from outbox_engine.store.status import ItemStatus

# A sample that takes longer is abandoned (the next one comes `depth_interval` later).
STATEMENT_TIMEOUT = 60.0

PENDING = int(ItemStatus.PENDING)

COUNTS_SQL = "SELECT bucket, count(*) FROM {table} WHERE status = {pending} GROUP BY bucket"
# Written as the claim's per-bucket range (store/items.py): with `t.bucket = b.bucket` the
# bucket drops out of the order and the primary key gives it too.
OLDEST_SQL = (
    "SELECT EXTRACT(EPOCH FROM now() - min(o.created_at))::float8 "
    "FROM unnest(CAST($1 AS integer[])) AS b(bucket) "
    "CROSS JOIN LATERAL (SELECT t.created_at FROM {table} t "
    "WHERE t.bucket >= b.bucket AND t.bucket <= b.bucket "
    f"AND t.status = {PENDING} ORDER BY t.bucket, t.id LIMIT 1) AS o"
)


@dataclass(frozen=True)
class Depth:
    """Pending items, seconds since the oldest pending one was created (0 when none), and
    the pending items of the deepest bucket."""

    pending: int
    oldest_seconds: float
    deepest_bucket: int


async def sample_depth(conn: Any, table: str) -> Depth:
    """The box's depth, read on `conn` (an asyncpg connection with the relay's session
    settings); raises what the database raises."""
    counts_sql = COUNTS_SQL.format(table=table, pending=PENDING)
    counts = await conn.fetch(counts_sql, timeout=STATEMENT_TIMEOUT)
    if not counts:
        return Depth(0, 0.0, 0)
    buckets = [int(row[0]) for row in counts]
    oldest_sql = OLDEST_SQL.format(table=table)
    oldest = await conn.fetchval(oldest_sql, buckets, timeout=STATEMENT_TIMEOUT)
    return Depth(
        sum(int(row[1]) for row in counts),
        max(float(oldest or 0.0), 0.0),
        max(int(row[1]) for row in counts),
    )
