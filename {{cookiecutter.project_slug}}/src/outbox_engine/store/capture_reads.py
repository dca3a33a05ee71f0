"""What the operator tools read and pick for a box relayed by Debezium: how many capture
rows each box has (and how old the oldest is), and the item ids a replay picks, in id
order and locked, so `replay` can capture them again (operations/recapture.py).

Kept apart from store/capture.py (the capture mechanism itself): these are the operator's
statements, narrowed by a selection (store/selection.py) like the other operator actions.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from outbox_engine.store.capture import CAPTURE_TABLE, HEARTBEAT_BOX
from outbox_engine.store.selection import ItemFilter, where_clause


@dataclass(frozen=True)
class CaptureRows:
    """A box's rows in the capture table (kept about ten minutes after capture)."""

    rows: int = 0
    oldest_age_seconds: float | None = None


async def capture_rows(conn: AsyncConnection) -> dict[str, CaptureRows]:
    """Per box name: its capture rows now (boxes without any are absent; heartbeats are
    not counted)."""
    rows = await conn.execute(
        text(
            f"SELECT box, count(*), EXTRACT(EPOCH FROM now() - min(captured_at)) "
            f"FROM {CAPTURE_TABLE} WHERE box <> :beat GROUP BY box"
        ),
        {"beat": HEARTBEAT_BOX},
    )
    return {str(r[0]): CaptureRows(int(r[1]), round(float(r[2] or 0.0), 3)) for r in rows}


async def pick_ids(
    conn: AsyncConnection, table: str, selection: ItemFilter, *, after_id: int, limit: int | None
) -> list[int]:
    """Lock and return the selected item ids above `after_id`, lowest first (at most
    `limit`; None: all), in `conn`'s open transaction."""
    where, params = where_clause(selection, "t")
    bound = " LIMIT :limit" if limit is not None else ""
    rows = await conn.execute(
        text(
            f"SELECT t.id FROM {table} AS t WHERE {where} AND t.id > :after_id "
            f"ORDER BY t.id{bound} FOR UPDATE"
        ),
        {**params, "after_id": after_id, **({"limit": limit} if limit is not None else {})},
    )
    return [int(r[0]) for r in rows]
