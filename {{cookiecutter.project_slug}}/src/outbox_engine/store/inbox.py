"""The inbox's statements: store a batch of Kafka messages, find message-id clashes, ping.

`InboxStatements.insert` stores a batch in ONE statement: the rows as arrays (unnest), a
duplicate id dropped by the unique uuid (`ON CONFLICT (uuid) DO NOTHING`, also within the
batch: the first one stays), and a NOTIFY on the box's channel when any row is new, in the
same transaction. It returns how many rows were new. `find_clashes` returns the positions
of rows whose id is stored with another payload (compared by SHA-256 on both sides, see
inbox/clash.py). All take an asyncpg connection (store/pgconn.py): the consumer's hot path
skips SQLAlchemy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from uuid import UUID


class InboxStatements:
    """The statements of one inbox table, built once per consumer."""

    def __init__(self, table: str, channel: str, rejected_header: str) -> None:
        self.channel = channel
        self._insert_sql = f"""
            WITH new AS (
                INSERT INTO {table} (uuid, event_name, event_key, bucket, payload,
                    headers, source_topic, source_partition, source_offset)
                SELECT u, e, k, b, p, h::jsonb, t, sp, so
                FROM unnest($1::uuid[], $2::text[], $3::text[], $4::integer[], $5::bytea[],
                            $6::text[], $7::text[], $8::integer[], $9::bigint[])
                     AS r(u, e, k, b, p, h, t, sp, so)
                ON CONFLICT (uuid) DO NOTHING
                RETURNING 1
            )
            SELECT count(*)::integer, CASE WHEN count(*) > 0 THEN pg_notify($10, '') END
            FROM new
        """
        # Positions (1-based) of the given rows whose id is stored with another payload.
        self._clash_sql = f"""
            SELECT r.i FROM unnest($1::uuid[], $2::bytea[]) WITH ORDINALITY AS r(u, d, i)
            JOIN {table} t ON t.uuid = r.u
            WHERE NOT (t.headers ? '{rejected_header}') AND sha256(t.payload) <> r.d
        """

    async def insert(self, conn: Any, rows: Sequence[dict[str, Any]], seconds: float) -> int:
        """Store `rows` (dicts with the column names) unless their uuid is stored; return
        how many were new. A NOTIFY on the box's channel goes with a new row's commit."""
        columns: tuple[list[Any], ...] = ([], [], [], [], [], [], [], [], [])
        for row in rows:
            columns[0].append(row["uuid"])
            columns[1].append(row["event_name"])
            columns[2].append(row["event_key"])
            columns[3].append(row["bucket"])
            columns[4].append(row["payload"])
            columns[5].append(json.dumps(row["headers"]))
            columns[6].append(row["source_topic"])
            columns[7].append(row["source_partition"])
            columns[8].append(row["source_offset"])
        inserted: int = await conn.fetchval(
            self._insert_sql, *columns, self.channel, timeout=seconds
        )
        return inserted

    async def find_clashes(
        self, conn: Any, ids: list[UUID], digests: list[bytes], seconds: float
    ) -> list[int]:
        """1-based positions in `ids` of those stored with a payload whose SHA-256 is not
        the given digest (rows stored as rejected are never compared)."""
        found = await conn.fetch(self._clash_sql, ids, digests, timeout=seconds)
        return [int(r[0]) for r in found]


async def ping(conn: Any) -> None:
    """`SELECT 1`: the database answers (the consumer's readiness check)."""
    await conn.fetchval("SELECT 1")
