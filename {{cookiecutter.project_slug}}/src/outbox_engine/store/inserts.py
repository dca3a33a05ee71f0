"""The SQL of `create()`: the item rows and the NOTIFY that wakes the workers, in one
statement (one round trip per call, however many items).

The statement is built once per table (cached) and takes arrays, one element per item:
`unnest` turns them into rows. The NOTIFY payload names the buckets that got items, so
only their worker lanes wake (see creation/items.py `_wake_payload`).
"""

from __future__ import annotations

import functools

from sqlalchemy import TextClause, text


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
