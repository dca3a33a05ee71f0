"""The SQL of `create()`: the item rows and the NOTIFY that wakes the workers, in one
statement (one round trip per call, however many items).

The statement is built once per table (cached) and takes arrays, one element per item:
`unnest` turns them into rows. The NOTIFY payload names the buckets that got items, so
only their worker lanes wake (see creation/items.py `_wake_payload`).

Replication (sharding/replication.py) inserts the rows it builds in a session's flush hook,
on the session's synchronous connection: `insert_and_wake`.
"""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import Connection, Table, TextClause, insert, text

from outbox_engine.store.wake import wake_sync


@functools.lru_cache(maxsize=256)
def insert_items_statement(table: str) -> TextClause:
    """Parameters: uuids, names, keys, buckets, payloads, headers (JSON text), channel,
    buckets_woken."""
    return text(
        f"""
        WITH new AS (
            INSERT INTO {table} (uuid, event_name, event_key, bucket, payload, headers)
            SELECT u, e, k, b, p, h::jsonb
            FROM unnest(CAST(:uuids AS uuid[]), CAST(:names AS text[]), CAST(:keys AS text[]),
                        CAST(:buckets AS integer[]), CAST(:payloads AS bytea[]),
                        CAST(:headers AS text[])) AS r(u, e, k, b, p, h)
        )
        SELECT pg_notify(:channel, :buckets_woken)
        """
    )


def insert_and_wake(
    connection: Connection, table: Table, rows: list[dict[str, Any]], channel: str
) -> None:
    """Insert item rows into a box's table and NOTIFY its workers, in the connection's open
    transaction (two statements, as replication always sent)."""
    connection.execute(insert(table), rows)
    wake_sync(connection, channel)
