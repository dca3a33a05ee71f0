"""Waking a box's workers: a NOTIFY on the box's channel, sent when the transaction commits.

Every change that makes items due outside `create()` (operator actions, backfill) wakes the
workers this way instead of leaving them to their poll interval. `create()` sends its own
NOTIFY in its insert statement (`store/inserts.py`), to keep one round trip.
"""

from __future__ import annotations

from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

_WAKE = text("SELECT pg_notify(:channel, '')")


async def wake(conn: AsyncConnection | AsyncSession, channel: str) -> None:
    """NOTIFY `channel` (with an empty payload: every lane of the box wakes) in `conn`'s
    open transaction."""
    await conn.execute(_WAKE, {"channel": channel})


def wake_sync(connection: Connection, channel: str) -> None:
    """`wake` on a synchronous connection (a session's flush hook)."""
    connection.execute(_WAKE, {"channel": channel})
