"""The inbox's statements: store a batch of Kafka messages and judge its duplicates, ping.

`InboxStatements.insert` stores a batch in ONE statement: the rows as one JSON array
(`jsonb_array_elements`) beside an array of their payloads, a duplicate id dropped by the
unique uuid (`ON CONFLICT (uuid) DO NOTHING`, also within the batch: the first one stays),
and a NOTIFY on the box's channel when any row is new, in the same transaction. The same
statement judges every row it did not store (inbox/clash.py): its payload against the
stored one, either the batch's own first row with that id or the row the table held before
the statement. It returns an `Inserted`: how many rows were new, which were clashes, and
which it could not judge (their id was stored by a transaction that committed after the
statement began: `find_clashes`, a statement of its own, judges those).

Why JSON and not one array per column: asyncpg encodes an array element by element, ~1.1-1.7
us each on the bench machine, 10 us a row for the nine columns, while `json.dumps` of the
whole batch runs in C, and the consumer's main thread is its limit (docs/benchmarks.md).
Payloads stay one `bytea[]` (binary, no escaping; as base64 in the JSON they cost the
client 12 us and PostgreSQL a third more per 1 KiB row). A batch whose payloads would pass
`MAX_STATEMENT_BYTES` (large messages) is sent as several statements in one transaction:
all of it is stored or none. All take an asyncpg connection (store/pgconn.py): the
consumer's hot path skips SQLAlchemy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

# A statement is kept under this size (estimated from the payloads, the rest of a row is
# small next to them): a batch of large messages goes in several statements.
MAX_STATEMENT_BYTES = 64 * 1024 * 1024


@dataclass
class Inserted:
    """What storing a batch did; positions are 0-based indexes into the rows given."""

    new: int = 0
    clashes: list[int] = field(default_factory=list)
    unjudged: list[int] = field(default_factory=list)

    def add(self, other: Inserted, offset: int) -> None:
        self.new += other.new
        self.clashes += [offset + i for i in other.clashes]
        self.unjudged += [offset + i for i in other.unjudged]


@dataclass
class Encoded:
    """A batch ready to send: per chunk, its rows' JSON and their payloads."""

    chunks: list[tuple[str, list[bytes]]]


def encode(rows: Sequence[dict[str, Any]]) -> Encoded:
    """The rows (dicts with the column names) as JSON arrays and payloads, in chunks of at
    most ~MAX_STATEMENT_BYTES (one row larger than that is a chunk of its own)."""
    chunks: list[tuple[list[list[Any]], list[bytes]]] = [([], [])]
    size = 0
    for row in rows:
        payload: bytes = row["payload"]
        estimate = len(payload) + 512
        if size + estimate > MAX_STATEMENT_BYTES and chunks[-1][1]:
            chunks.append(([], []))
            size = 0
        size += estimate
        chunks[-1][0].append(
            [
                str(row["uuid"]),
                row["event_name"],
                row["event_key"],
                row["bucket"],
                row["headers"],
                row["source_topic"],
                row["source_partition"],
                row["source_offset"],
            ]
        )
        chunks[-1][1].append(payload)
    # ASCII escapes: a lone surrogate that reached a string is refused by PostgreSQL as data
    # (SQLSTATE 22: the row is stored as unstorable), not by the client's encoder.
    return Encoded(
        [(json.dumps(fields, separators=(",", ":")), payloads) for fields, payloads in chunks]
    )


class InboxStatements:
    """The statements of one inbox table, built once per consumer."""

    def __init__(self, table: str, channel: str, rejected_header: str) -> None:
        self.channel = channel
        rejected = rejected_header.replace("'", "''")
        # `seen`: the rows this statement did not store whose content is as received (a row
        # reduced to a rejected one carries no payload to compare). Each is judged against
        # the stored row: the batch's first row with its id when that one was new (`new`
        # rows are not visible to the statement's own reads), else the table's row as the
        # statement began; NULL when that row is not visible either (stored concurrently).
        # When every row was new (the usual batch) nothing is judged: PostgreSQL runs an
        # `ARRAY(...)` sub-select of a CASE branch not taken never, and `judged` with it.
        self._insert_sql = f"""
            WITH input AS MATERIALIZED (
                SELECT a.i::integer AS i, (a.r->>0)::uuid AS u, a.r->>1 AS e, a.r->>2 AS k,
                       (a.r->>3)::integer AS b, a.p, a.r->4 AS h,
                       a.r->>5 AS t, (a.r->>6)::integer AS sp, (a.r->>7)::bigint AS so
                FROM ROWS FROM (jsonb_array_elements($1::jsonb), unnest($2::bytea[]))
                     WITH ORDINALITY AS a(r, p, i)
            ), new AS (
                INSERT INTO {table} (uuid, event_name, event_key, bucket, payload,
                    headers, source_topic, source_partition, source_offset)
                SELECT u, e, k, b, p, h, t, sp, so FROM input ORDER BY i
                ON CONFLICT (uuid) DO NOTHING
                RETURNING uuid
            ), firsts AS (
                SELECT DISTINCT ON (u) u, i, p, h FROM input ORDER BY u, i
            ), seen AS (
                SELECT x.i, x.u, x.p, n.uuid IS NOT NULL AS in_batch,
                       f.p AS first_p, f.h AS first_h
                FROM input x
                JOIN firsts f ON f.u = x.u
                LEFT JOIN new n ON n.uuid = x.u
                WHERE (n.uuid IS NULL OR x.i > f.i) AND NOT (x.h ? '{rejected}')
            ), judged AS (
                SELECT s.i, CASE
                    WHEN s.in_batch THEN NOT (s.first_h ? '{rejected}') AND s.first_p <> s.p
                    WHEN t.uuid IS NULL THEN NULL
                    ELSE NOT (t.headers ? '{rejected}') AND t.payload <> s.p
                END AS clash
                FROM seen s LEFT JOIN {table} t ON NOT s.in_batch AND t.uuid = s.u
            ), counted AS (
                SELECT count(*)::integer AS n FROM new
            )
            SELECT n, CASE WHEN n > 0 THEN pg_notify($3, '') END,
                   CASE WHEN n < cardinality($2::bytea[])
                        THEN ARRAY(SELECT i FROM judged WHERE clash ORDER BY i) END,
                   CASE WHEN n < cardinality($2::bytea[])
                        THEN ARRAY(SELECT i FROM judged WHERE clash IS NULL ORDER BY i) END
            FROM counted
        """
        # Positions (1-based) of the given rows whose id is stored with another payload.
        self._clash_sql = f"""
            SELECT r.i FROM unnest($1::uuid[], $2::bytea[]) WITH ORDINALITY AS r(u, d, i)
            JOIN {table} t ON t.uuid = r.u
            WHERE NOT (t.headers ? '{rejected}') AND sha256(t.payload) <> r.d
        """

    async def insert(self, conn: Any, rows: Sequence[dict[str, Any]], seconds: float) -> Inserted:
        """Store `rows` (dicts with the column names) unless their uuid is stored; judge the
        others. A NOTIFY on the box's channel goes with a new row's commit."""
        return await self.insert_encoded(conn, encode(rows), seconds)

    async def insert_encoded(self, conn: Any, batch: Encoded, seconds: float) -> Inserted:
        """`insert` of a batch encoded beforehand (`encode`)."""
        if len(batch.chunks) == 1:
            return await self._insert_chunk(conn, batch.chunks[0], seconds)
        result = Inserted()
        async with conn.transaction():
            offset = 0
            for chunk in batch.chunks:
                result.add(await self._insert_chunk(conn, chunk, seconds), offset)
                offset += len(chunk[1])
        return result

    async def _insert_chunk(
        self, conn: Any, chunk: tuple[str, list[bytes]], seconds: float
    ) -> Inserted:
        fields, payloads = chunk
        row = await conn.fetchrow(self._insert_sql, fields, payloads, self.channel, timeout=seconds)
        clashes, unjudged = row[2] or (), row[3] or ()  # NULL: every row was new
        return Inserted(int(row[0]), [int(i) - 1 for i in clashes], [int(i) - 1 for i in unjudged])

    async def find_clashes(
        self, conn: Any, ids: Sequence[UUID | str], digests: list[bytes], seconds: float
    ) -> list[int]:
        """1-based positions in `ids` of those stored with a payload whose SHA-256 is not
        the given digest (rows stored as rejected are never compared)."""
        found = await conn.fetch(self._clash_sql, ids, digests, timeout=seconds)
        return [int(r[0]) for r in found]


async def ping(conn: Any) -> None:
    """`SELECT 1`: the database answers (the consumer's readiness check)."""
    await conn.fetchval("SELECT 1")
