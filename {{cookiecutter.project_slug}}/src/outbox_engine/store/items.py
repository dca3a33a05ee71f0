"""What the relay reads of a box's items: the claim, the flush's claim by id, the filters'
look-ups (superseded, coalesced), the idle lanes' probe (due_lanes) and the flush's
read-backs (buckets, states). (The backlog
depth the worker samples: depth.py.)

Every statement is built once per box (the table name and the box's options are part of its
text, so each stays one prepared statement on a kept connection) and run by a small typed
method on an asyncpg connection. State changes are not here: they name the state they expect
and live in record.py.

Claimed rows need no "processing" status: bucket ownership (ownership.py) makes a claim
exclusive, and a crash between claim and record leaves the items pending for the next owner.
Columns of a claimed row, by position (the relay reads them so, see relay/claim.py):
id, uuid, event_name, event_key, bucket, payload, headers (as text: the relay parses it,
faster than the connection's jsonb codec), errors_count, created_at, then for an inbox
source_topic, source_partition, source_offset.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.store.models import BLOCKING_ROWS
from outbox_engine.store.pgconn import asyncpg_sql
from outbox_engine.store.status import ItemStatus

# A claim that takes longer is abandoned (its connection dropped) and retried: a connection
# whose server vanished without closing it must not hang a lane.
STATEMENT_TIMEOUT = 60.0

# "An older item of t's key", for the probes of the claims. A generic plan made while the
# table has no page (vacuumed or analysed while empty) estimates one row for every path and
# picks among equal costs: written as `a.event_key = t.event_key AND a.id < t.id` in a plain
# NOT EXISTS, the probe became a join that read the key index of open items whole for every
# candidate (1.5M buffers for a claim of 500 from a backlog of 3,000), or went through the
# primary key and read every older row (36,591). Here, `OFFSET 0` keeps the probe a subplan
# run per candidate with t's key and id as parameters (PostgreSQL does not turn such an
# EXISTS into a join), and the row comparison, which only an (event_key, id) index can
# bound, leaves the primary key no bound to search by: the probe is a range of the key's
# older entries in one of the key indexes (3,676 buffers for that claim on that plan). With
# sound statistics it costs a descent of the small blocked index per candidate (1,502
# buffers for the claim against the join's 503: ~0.6 us an item, docs/performance.md).
OLDER_OF_KEY = "{a}.event_key = t.event_key AND ({a}.event_key, {a}.id) < (t.event_key, t.id)"

# "A newer item of r's key", for the look-ups of delivered items by key (superseded,
# coalesced) on a table whose key index holds every row: a range of the key's newer entries
# in that index, probed per candidate (`OFFSET 0`, as OLDER_OF_KEY). Written as a plain
# semi-join, the generic plan made while the table had no page was a hash join over a
# sequential scan of the whole table, kept for every later look-up: 3,700 buffers and 69 ms
# for 20 candidates once the table held 300,000 delivered rows (temp files too), against 80
# buffers and 0.2 ms for the probes on the relay's session settings.
NEWER_OF_KEY = "t.event_key = r.k AND (t.event_key, t.id) > (r.k, r.id)"

PENDING = int(ItemStatus.PENDING)
FAILED = int(ItemStatus.FAILED)
DELIVERED = int(ItemStatus.DELIVERED)

# "The table has a row that may block a key", in `SELECT 1 FROM {table} g WHERE ...` (the
# unqualified columns are g's, the innermost FROM): the blocked index's own predicate, so
# that its plan is a look at that index's first entry. Looser than the probe's condition (a
# row whose retry is already due is in the index too): false means that no candidate can be
# blocked, true only that the probes run. Not the probe's condition: on a table with many
# rows whose retries are due, it would read each of those rows to find none, every claim.
ANY_BLOCKING = BLOCKING_ROWS.text


class ItemReads:
    """The read statements of one box's items."""

    def __init__(
        self,
        table: str,
        *,
        inbox: bool,
        strict_order: bool,
        object_header: str,
        delivered_key_index: bool,
    ) -> None:
        columns = (
            "t.id, t.uuid, t.event_name, t.event_key, t.bucket, t.payload, t.headers::text, "
            "t.errors_count, t.created_at"
        )
        if inbox:
            columns += ", t.source_topic, t.source_partition, t.source_offset"
        # A strict box holds a key back behind an older item that is in backoff or failed for
        # good: the claim skips those keys at the database (a probe of the small partial
        # index of such rows, see models.BLOCKING_ROWS), so a key in backoff never fills a
        # bucket's claim with items that cannot go and never starves the bucket's other keys.
        # The probe is written so that its only plan is a look-up of the candidate's key,
        # whatever the statistics say (see OLDER_OF_KEY). It runs only when the table has a
        # blocking row at all (ANY_BLOCKING: one look at the blocked index a statement, an
        # InitPlan); in a box with none, the usual case, every candidate's probe would find
        # nothing, and skipping them takes two thirds of a claim's buffers (1,527 -> 528 for
        # 500 items; docs/performance.md, "The probe runs only when something can block").
        blocked = (
            f"""AND (NOT EXISTS (SELECT 1 FROM {table} g WHERE {ANY_BLOCKING})
                OR NOT EXISTS (SELECT 1 FROM {table} f WHERE {OLDER_OF_KEY.format(a="f")}
                AND (f.status = {FAILED}
                    OR (f.status = {PENDING} AND f.next_attempt_at IS NOT NULL
                        AND f.next_attempt_at > now())) OFFSET 0))"""
            if strict_order
            else ""
        )
        # What makes a row of bucket b.bucket claimable now: the claim's conditions, shared
        # with the idle probe's `due_check` so that both always ask the same question.
        self._table = table
        self._claimable = f"""t.bucket >= b.bucket AND t.bucket <= b.bucket
                  AND t.status = {PENDING}
                  AND (t.next_attempt_at IS NULL OR t.next_attempt_at <= now()) {blocked}
                  AND t.event_key <> ALL(CAST(:paused_keys AS text[]))"""
        self.claim_sql = asyncpg_sql(
            f"""
            SELECT i.* FROM unnest(CAST(:buckets AS integer[])) WITH ORDINALITY AS b(bucket, ord)
            CROSS JOIN LATERAL (
                SELECT {columns}
                FROM {table} t
                WHERE {self._claimable}
                ORDER BY t.bucket, t.id
                LIMIT :per_bucket
            ) AS i
            LIMIT :limit
            """,
            "buckets",
            "per_bucket",
            "limit",
            "paused_keys",
        )
        # The synchronous flush delivers only an item that heads its key: no older item of
        # its key pending (other than the flushed ones) or, in a strict box, failed. Pauses
        # and bucket ownership are the flusher's to check. The items are found by their
        # uuids only: `t.status + 0` proves no partial index's predicate, so the plan cannot
        # read the whole pending index instead (a plan made on a pageless table did, with
        # one row estimated either way: 3,025 buffers to flush two items ahead of a backlog
        # of 3,000; 10 now).
        older = f"p.status = {FAILED} OR " if strict_order else ""
        self.claim_ids_sql = asyncpg_sql(
            f"""
            SELECT {columns}
            FROM {table} t
            WHERE t.uuid = ANY(CAST(:uuids AS uuid[])) AND t.status + 0 = {PENDING}
              AND (t.next_attempt_at IS NULL OR t.next_attempt_at <= now())
              AND t.event_key <> ALL(CAST(:paused_keys AS text[]))
              AND NOT EXISTS (SELECT 1 FROM {table} p WHERE {OLDER_OF_KEY.format(a="p")}
                              AND ({older}(p.status = {PENDING}
                              AND p.uuid <> ALL(CAST(:uuids AS uuid[])))) OFFSET 0)
            ORDER BY t.bucket, t.id
            """,
            "uuids",
            "paused_keys",
        )
        # latest_available: a retried item is dropped when a newer item of its key and
        # event was delivered. Coalescing: an item is dropped when a newer item of the same
        # object (same shard key, category and object identifier) is pending or delivered.
        # With a key index of every row both are probes of it per candidate, to be run on
        # the relay's session settings (`lookups_on_index`); with one of open rows only
        # there is no index of delivered rows by key to probe (the worker warns, see
        # relay/filters.py), and they stay semi-joins for the planner to choose.
        self.lookups_on_index = delivered_key_index
        if delivered_key_index:
            newer, probe_end = NEWER_OF_KEY, " OFFSET 0"
        else:
            newer, probe_end = "t.event_key = r.k AND t.id > r.id", ""
        self.superseded_sql = asyncpg_sql(
            f"""
            SELECT r.id FROM unnest(CAST(:ids AS bigint[]), CAST(:keys AS text[]),
                                    CAST(:names AS text[])) AS r(id, k, e)
            WHERE EXISTS (SELECT 1 FROM {table} t WHERE {newer} AND t.event_name = r.e
                          AND t.status = {DELIVERED}{probe_end})
            """,
            "ids",
            "keys",
            "names",
        )
        self.coalesced_sql = asyncpg_sql(
            f"""
            SELECT r.id FROM unnest(CAST(:ids AS bigint[]), CAST(:keys AS text[]),
                                    CAST(:names AS text[]), CAST(:objects AS text[])) AS r(id, k, e, o)
            WHERE EXISTS (SELECT 1 FROM {table} t WHERE {newer} AND t.event_name = r.e
                          AND t.headers->>'{object_header}' = r.o
                          AND t.status IN ({PENDING}, {DELIVERED}){probe_end})
            """,
            "ids",
            "keys",
            "names",
            "objects",
        )

    async def claim(
        self, conn: Any, buckets: list[int], per_bucket: int, limit: int, paused_keys: list[str]
    ) -> list[Any]:
        """Up to `limit` pending, due items, at most `per_bucket` of each bucket in the
        order given, each bucket in id order; `conn` is an asyncpg connection."""
        rows: list[Any] = await conn.fetch(
            self.claim_sql, buckets, per_bucket, limit, paused_keys, timeout=STATEMENT_TIMEOUT
        )
        return rows

    def due_check(self, buckets: str, paused_keys: str) -> str:
        """An SQL condition, true when `claim` of the buckets in parameter `buckets` (an
        integer array) would return a row now, with parameter `paused_keys` (a text array)
        as the claim's paused keys: one index range scan per bucket that stops at the first
        claimable row (the idle probe, relay/idle_probe.py)."""
        claimable = self._claimable.replace(":paused_keys", paused_keys)
        return (
            f"EXISTS (SELECT 1 FROM unnest(CAST({buckets} AS integer[])) AS b(bucket) "
            f"CROSS JOIN LATERAL (SELECT 1 FROM {self._table} t WHERE {claimable} LIMIT 1) AS i)"
        )

    async def claim_ids(self, conn: Any, uuids: list[UUID], paused_keys: list[str]) -> list[Any]:
        """The items of `uuids` that are pending, due, unpaused and head their key."""
        rows: list[Any] = await conn.fetch(
            self.claim_ids_sql, uuids, paused_keys, timeout=STATEMENT_TIMEOUT
        )
        return rows

    async def superseded(
        self, conn: Any, ids: Sequence[int], keys: Sequence[str], names: Sequence[str]
    ) -> set[int]:
        """Of these items, those a newer delivered item of the same key and event follows;
        `conn` is an asyncpg connection (the relay's, when `lookups_on_index`)."""
        rows = await conn.fetch(
            self.superseded_sql, list(ids), list(keys), list(names), timeout=STATEMENT_TIMEOUT
        )
        return {row[0] for row in rows}

    async def coalesced(
        self,
        conn: Any,
        ids: Sequence[int],
        keys: Sequence[str],
        names: Sequence[str],
        objects: Sequence[str],
    ) -> set[int]:
        """Of these items, those a newer pending or delivered item of the same object
        follows; `conn` as for `superseded`."""
        rows = await conn.fetch(
            self.coalesced_sql,
            list(ids),
            list(keys),
            list(names),
            list(objects),
            timeout=STATEMENT_TIMEOUT,
        )
        return {row[0] for row in rows}


def due_lanes_sql(checks: Sequence[ItemReads]) -> str:
    """One statement for many lanes: for check i (a box's reads, its lane's buckets in
    parameter 2i+1, its paused keys in 2i+2), a row `i` when that lane has a claimable item."""
    return " UNION ALL ".join(
        f"SELECT {i} WHERE {reads.due_check(f'${2 * i + 1}', f'${2 * i + 2}')}"
        for i, reads in enumerate(checks)
    )


async def due_lanes(
    conn: Any, checks: Sequence[tuple[ItemReads, list[int], list[str]]]
) -> set[int]:
    """The indexes of the `checks` (reads, buckets, paused keys) that have a claimable item
    now; `conn` is an asyncpg connection."""
    if not checks:
        return set()
    params = [value for _reads, buckets, keys in checks for value in (buckets, keys)]
    sql = due_lanes_sql([reads for reads, _buckets, _keys in checks])
    rows = await conn.fetch(sql, *params, timeout=STATEMENT_TIMEOUT)
    return {row[0] for row in rows}


async def buckets_of(conn: Any, table: str, uuids: list[UUID]) -> dict[UUID, int]:
    """The bucket of each of these items (the synchronous flush locks them); `conn` is an
    asyncpg connection."""
    rows = await conn.fetch(f"SELECT uuid, bucket FROM {table} WHERE uuid = ANY($1::uuid[])", uuids)
    return {row[0]: row[1] for row in rows}


async def states_of(
    engine: AsyncEngine, table: str, uuids: list[UUID]
) -> list[tuple[UUID, int, int, str | None]]:
    """(uuid, status, errors_count, last_error) of each of these items: what a flush that
    waits for the bucket's owner reads back."""
    query = text(
        f"SELECT uuid, status, errors_count, last_error FROM {table} WHERE uuid = ANY(:ids)"
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query, {"ids": uuids})).all()
    return [(row[0], row[1], row[2], row[3]) for row in rows]
