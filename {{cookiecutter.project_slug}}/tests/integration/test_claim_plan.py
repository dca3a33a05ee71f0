"""The relay's claims on real PostgreSQL: each claim statement is prepared once per
connection and soon runs on a cached generic plan, made from whatever the table looked like
then. Whatever that was (analysed while empty, with or without column statistics left from
earlier rows; a few pages; none at all), the plan stays a few index look-ups per bucket and
per candidate, and never reads a table, an index or a key whole (store/items.py,
docs/performance.md "The claim's plan")."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest
from sqlalchemy import text

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.config.registry import Box
from outbox_engine.middleware import Middlewares
from outbox_engine.relay.processor import RELAY_SESSION_SETTINGS, BoxProcessor
from outbox_engine.store.pgconn import DriverConnections
from outbox_engine.store.status import ItemStatus

from ..support import OUTBOX_BOX, make_registry
from .test_relay import create


def generic_plan_processor(container: Container, box: Box) -> BoxProcessor:
    """A processor whose claims run on the relay's session settings and always on the
    generic plan, made at its first claim and cached. (Whether PostgreSQL switches to the
    generic plan after five custom ones depends on its cost estimates, which the strict
    claim's NOT EXISTS changes: forced, the traps these tests are about are always set.)"""
    processor = BoxProcessor(
        box,
        container.engine(),
        container.session_factory(),
        Middlewares(),
        keep_connections=True,
    )
    processor._connections = processor.claimer.connections = DriverConnections(
        container.engine(),
        keep=True,
        settings={**RELAY_SESSION_SETTINGS, "plan_cache_mode": "force_generic_plan"},
    )
    return processor


EMPTY = "'{}'"  # an empty array argument (paused keys)


async def explain_cached(
    processor: BoxProcessor, statement: str, arguments: str, options: str = ""
) -> tuple[int, Any]:
    """(generic plans so far, the JSON plan tree) of `statement` as cached on `processor`'s
    own connection, run by `EXPLAIN (<options>, FORMAT JSON) EXECUTE name(<arguments>)`.
    Found by its text: a pooled connection may also hold the claim of a differently
    configured processor of this box from an earlier test."""
    async with processor._connections.acquire() as conn:
        name, generic = await conn.fetchrow(
            "SELECT name, generic_plans FROM pg_prepared_statements WHERE statement = $1",
            statement,
        )
        plan = await conn.fetchval(
            f"EXPLAIN ({options + ', ' if options else ''}FORMAT JSON) EXECUTE {name}({arguments})"
        )
    return int(generic), json.loads(plan) if isinstance(plan, str) else plan


async def explain_cached_claim(
    processor: BoxProcessor, buckets: list[int], options: str = ""
) -> tuple[int, Any]:
    """`explain_cached` of the claim over `buckets`, 64 a bucket, 500 in all."""
    listed = "{" + ",".join(map(str, buckets)) + "}"
    return await explain_cached(
        processor, processor.claimer.reads.claim_sql, f"'{listed}', 64, 500, " + EMPTY, options
    )


KB = "convert_to(repeat('x', 1024), 'UTF8')"  # a payload of 1 KB


async def insert_items(
    conn: Any,
    table: str,
    count: int,
    *,
    key: str = "(g % 100)::text",
    bucket: str = "(g % 100) % 16",
    status: str = str(int(ItemStatus.PENDING)),
    payload: str = KB,
) -> int:
    """Insert `count` items in one statement, their key, bucket, status and payload SQL
    expressions of g = 1..count (by default: pending, 1 KB, 100 keys over the default box's
    16 buckets, each key in one bucket); the rows inserted."""
    result = await conn.execute(
        text(
            f"INSERT INTO {table} (uuid, event_name, event_key, bucket, status, payload) "
            f"SELECT gen_random_uuid(), 'e', {key}, {bucket}, {status}, {payload} "
            "FROM generate_series(1, :count) g"
        ),
        {"count": count},
    )
    return int(result.rowcount)


async def leave_column_statistics(
    container: Container, table: str, key: str = "(g % 100)::text"
) -> None:
    """Leave `table` empty, with no page, and with the column statistics of 5,000 earlier
    rows (by default 100 keys over 16 buckets, one in ten pending, the rest delivered): an
    ANALYZE of the empty table after it keeps them (it has no row to replace them with), as
    happens to a table a test suite truncates between tests."""
    async with container.engine().connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        pending, delivered = int(ItemStatus.PENDING), int(ItemStatus.DELIVERED)
        status = f"CASE WHEN g % 10 = 0 THEN {pending} ELSE {delivered} END"
        await insert_items(conn, table, 5000, key=key, bucket="g % 16", status=status)
        await conn.execute(text(f"ANALYZE {table}"))
        await conn.execute(text(f"TRUNCATE {table}"))


async def test_claims_stay_on_the_index_after_a_plan_made_on_an_empty_table(
    container: Container,
) -> None:
    """A prepared claim runs on a generic plan cached per connection. Made while the table
    was empty and analyzed (a fresh deployment), that plan is a sequential scan, and it would
    stay one, reading every row on each claim, until the next ANALYZE. The relay's sessions
    rule sequential scans out."""
    box = make_registry().get(OUTBOX_BOX)
    table = box.table_name
    processor = generic_plan_processor(container, box)
    async with container.engine().connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.execute(text(f"VACUUM ANALYZE {table}"))
    buckets = list(range(box.config.bucket_count))
    try:
        for _ in range(8):  # past the 5 custom plans: the generic plan is cached now
            assert await processor.claim(buckets) == []
        async with container.engine().begin() as conn:
            delivered = str(int(ItemStatus.DELIVERED))
            await insert_items(conn, table, 3000, status=delivered, payload="'\\x00'")
        await create(container, [("k", "thing_updated", {"n": 1})])
        claimed = [item.event_key for item, _ in await processor.claim(buckets)]
        generic, tree = await explain_cached_claim(processor, buckets)
    finally:
        await processor.close()
    plan_text = json.dumps(tree)
    assert claimed == ["k"]
    assert generic >= 4  # the cached generic plan, not one made for these rows
    assert "Seq Scan" not in plan_text
    # Which index serves each read depends on the statistics VACUUM ANALYZE found (rows
    # earlier tests left before their cleanup): any index scan will do; a full read will
    # not, nor a bitmap (it reads dead entries again on every call: the next test).
    scans = _relation_scans(tree[0]["Plan"], table)
    assert scans, plan_text
    assert all(kind in INDEX_READS for kind in scans), scans


async def plan_on_a_pageless_table(container: Container, table: str, statistics: str) -> None:
    """Leave `table` with no page, analysed, and its column statistics `statistics`: "none"
    (never had a row), "left" (leave_column_statistics) or "one key" (the same, all of one
    key, as a suite whose tests use one key leaves them). Autovacuum is off until
    `autovacuum_back_on`: its ANALYZE would replace a plan these tests need cached."""
    if statistics == "left":
        await leave_column_statistics(container, table)
    elif statistics == "one key":
        await leave_column_statistics(container, table, key="'k'")
    async with container.engine().connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.execute(text(f"VACUUM ANALYZE {table}"))
        await conn.execute(text(f"ALTER TABLE {table} SET (autovacuum_enabled = false)"))
        pages = (await conn.execute(text(f"SELECT pg_relation_size('{table}')"))).scalar_one()
    assert pages == 0


async def autovacuum_back_on(container: Container, table: str) -> None:
    async with container.engine().connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.execute(text(f"ALTER TABLE {table} RESET (autovacuum_enabled)"))


def buffers(tree: Any) -> int:
    top = tree[0]["Plan"]
    return int(top["Shared Hit Blocks"] + top["Shared Read Blocks"])


@pytest.mark.parametrize("rows_at_planning", [0, 20, 100])
async def test_claims_stay_cheap_while_delivered_rows_wait_for_vacuum(
    container: Container, rows_at_planning: int
) -> None:
    """Every delivered item leaves dead entries in the pending index and the key index of
    open items until the next vacuum, which on a busy table is minutes away. A claim that
    reads an index as a bitmap visits every dead entry again on each call, and the generic
    plan made while the table held a few pages (20 items of 1 KB, planned from its size on
    disk as the statistics say "empty") read the whole key index of open items that way,
    then sorted: under 200 items/s a claim grew to 2-6 ms and 1,100-3,600 buffers within
    30 s (the bench's steady scenario, latency p50 3 -> 20 ms). A plain index scan marks
    the dead entries it passes, so the claims after it skip them: the relay's sessions
    rule bitmap scans out. Here: the claim's generic plan cached with 20 or 100 items in
    the vacuumed, empty-looking table; then 3,000 items delivered and not vacuumed (once no
    older transaction can see them), and one pending: the claim finds it reading a few
    buffers per bucket.

    With no item at planning the table has no page at all, and the column statistics are
    those of earlier rows (as a suite's earlier tests leave them): PostgreSQL then estimates
    one row for every path, and the strict probe of the old claim went through the primary
    key, reading every older row (4,250 buffers a claim for these 3,000 in CI) until the
    table's next ANALYZE. The probe is now a look-up of the candidate's key only
    (store/items.py, OLDER_OF_KEY)."""
    box = make_registry().get(OUTBOX_BOX)
    table = box.table_name
    processor = generic_plan_processor(container, box)
    buckets = list(range(box.config.bucket_count))
    # (No autovacuum during the test either: it would clear the dead entries this is about.)
    await plan_on_a_pageless_table(container, table, "left")
    try:
        async with container.engine().begin() as conn:
            await insert_items(conn, table, rows_at_planning)
        for _ in range(3):
            assert len(await processor.claim(buckets)) == rows_at_planning
        async with container.engine().begin() as conn:
            await insert_items(conn, table, 3000)
            delivered = await conn.execute(
                text(f"UPDATE {table} SET status = {int(ItemStatus.DELIVERED)}")
            )
            xid = (await conn.execute(text("SELECT xid(pg_current_xact_id())"))).scalar_one()
        assert delivered.rowcount == 3000 + rows_at_planning
        await wait_until_dead_to_all(container, int(xid))
        await create(container, [("k", "thing_updated", {"n": 1})])
        assert [item.event_key for item, _ in await processor.claim(buckets)] == ["k"]
        for _ in range(2):  # measured on the second run: what every later claim reads
            generic, last = await explain_cached_claim(processor, buckets, "ANALYZE, BUFFERS")
    finally:
        await processor.close()
        await autovacuum_back_on(container, table)
    assert generic >= 4  # every claim ran on the plan cached at the first one
    top = last[0]["Plan"]
    assert top["Actual Rows"] == 1
    assert "Bitmap" not in json.dumps(last), json.dumps(last)
    # An index descent per bucket (a block or two), the item's heap page and its key's
    # probe: at most a few per bucket (44-63 measured). A bitmap over the dead entries
    # reads their heap pages for every bucket (7,233 measured with 20 rows at planning).
    read = buffers(last)
    assert read <= 4 * len(buckets), (read, json.dumps(last))


@pytest.mark.parametrize("statistics", ["none", "left", "one key"])
async def test_a_claim_planned_on_a_pageless_table_takes_a_backlog_at_index_cost(
    container: Container, statistics: str
) -> None:
    """The plan the claim caches while its table has no page (a box vacuumed or analysed
    while empty: after retention purged it, or a suite's truncation) estimates one row for
    every path. Written as a plain NOT EXISTS, the strict probe became a join that read the
    key index of open items whole for every candidate: 1,509,500 buffers for a claim of 500
    from a backlog of 3,000 (on every claim until the next ANALYZE, within a minute or so:
    behind a backlog of 100,000, a claim would outlast its timeout). Here: the plan cached
    on the pageless table, then 3,000 pending items in 100 keys; the claim takes the oldest
    of each bucket in id order, reading a few buffers per item."""
    box = make_registry().get(OUTBOX_BOX)
    table = box.table_name
    buckets = list(range(box.config.bucket_count))
    processor = generic_plan_processor(container, box)
    await plan_on_a_pageless_table(container, table, statistics)
    try:
        for _ in range(3):
            assert await processor.claim(buckets) == []
        async with container.engine().begin() as conn:
            bucket = f"(g % 100) % {len(buckets)}"  # each key in one bucket, every bucket
            assert await insert_items(conn, table, 3000, bucket=bucket) == 3000
            by_bucket = {
                bucket: ids
                for bucket, ids in await conn.execute(
                    text(f"SELECT bucket, array_agg(id ORDER BY id) FROM {table} GROUP BY bucket")
                )
            }
            rows = await conn.execute(text(f"SELECT id, event_key FROM {table}"))
            key_of: dict[int, str] = {row.id: row.event_key for row in rows}
        claimed = [(item.bucket, item.id) for item, _ in await processor.claim(buckets)]
        rotation = processor.claimer._rotation  # the bucket this claim started at
        generic, tree = await explain_cached_claim(processor, buckets, "ANALYZE, BUFFERS")
    finally:
        await processor.close()
        await autovacuum_back_on(container, table)
    # Each bucket's oldest items up to the claimer's share (relay/claim.py: the batch over
    # the buckets, x4; with 16 buckets of 180 or 210 items, 128: three whole shares from
    # the bucket the claim started at, the rest from the next), the batch in all, returned
    # in (bucket, id) order.
    limit = box.config.batch_size
    share = min(limit, max(8, math.ceil(limit / len(buckets)) * 4))
    order = [*buckets[rotation:], *buckets[:rotation]]
    expected = sorted([(b, i) for b in order for i in by_bucket[b][:share]][:limit])
    assert len(claimed) == min(limit, 3000)
    assert claimed == expected
    assert generic >= 1  # the plan cached on the pageless table, not one made for the rows
    assert tree[0]["Plan"]["Actual Rows"] == 500  # 64 a bucket, 500 in all
    # What the explained claim may read: an index entry and a heap page per candidate, a
    # descent per bucket, and for each candidate's probe its key's older items (on this
    # plan the probe walks the key's older entries in the key index of open items, each
    # checked on its heap page): bounded by the candidates of its bucket, not by the
    # backlog. (The old claim's probe read every older row: 36,591 buffers here.)
    candidates = [i for b in buckets for i in by_bucket[b][:64]][:500]
    older = sum(
        len([j for j in candidates if key_of[j] == key_of[i] and j < i]) for i in candidates
    )
    assert buffers(tree) <= 2 * (2 * len(candidates) + 2 * len(buckets) + older), (
        older,
        json.dumps(tree),
    )


async def test_the_flush_planned_on_a_pageless_table_looks_up_its_keys_only(
    container: Container,
) -> None:
    """The flush's claim by id (claim_ids) asks the same "older item of this key?" for each
    flushed item, and caches its plan the same way: planned on a pageless table, it must
    stay a look-up of the flushed items' keys with a backlog of 3,000 behind them."""
    box = make_registry().get(OUTBOX_BOX)
    table = box.table_name
    processor = generic_plan_processor(container, box)
    reads = processor.claimer.reads
    await plan_on_a_pageless_table(container, table, "left")
    try:
        async with processor._connections.acquire() as conn:
            for _ in range(3):
                assert await reads.claim_ids(conn, [], []) == []
        async with container.engine().begin() as conn:
            await insert_items(conn, table, 3000, key="'backlog-' || (g % 100)")
        await create(container, [("k", "thing_updated", {"n": 1}), ("k", "thing_updated", {})])
        async with container.engine().connect() as conn:
            flushed = list(
                (await conn.execute(text(f"SELECT uuid FROM {table} WHERE event_key = 'k'")))
                .scalars()
                .all()
            )
        async with processor._connections.acquire() as conn:
            rows = await reads.claim_ids(conn, flushed, [])
        listed = "{" + ",".join(map(str, flushed)) + "}"
        generic, tree = await explain_cached(
            processor, reads.claim_ids_sql, f"'{listed}', " + EMPTY, "ANALYZE, BUFFERS"
        )
    finally:
        await processor.close()
        await autovacuum_back_on(container, table)
    assert len(flushed) == 2
    # Both: the older of the two is flushed with the newer, and no other item has key "k".
    assert sorted(row[1] for row in rows) == sorted(flushed)
    assert generic >= 1
    assert tree[0]["Plan"]["Actual Rows"] == 2
    # Two uuid look-ups and two key probes: a handful of buffers, not the backlog.
    assert buffers(tree) <= 20, json.dumps(tree)


# What keeps the rows a transaction updated "recently dead" (no scan may mark their index
# entries, no vacuum may remove them) while it lasts: a transaction with an xid that started
# before it committed, in any database of the server (the snapshots taken here count it as
# running), a snapshot of this database older than it, a replication slot's xmin.
OLDER_HOLDERS = """
SELECT 'pid ' || pid || ' (' || coalesce(datname, '-') || ', ' || coalesce(state, '-')
       || ', open since ' || coalesce(xact_start::text, '-') || '): ' || left(query, 120)
  FROM pg_stat_activity
 WHERE pid <> pg_backend_pid()
   AND ((backend_xid IS NOT NULL AND age(backend_xid) >= age(CAST(:xid AS xid)))
        OR (datname = current_database() AND backend_xmin IS NOT NULL
            AND age(backend_xmin) >= age(CAST(:xid AS xid))))
UNION ALL
SELECT 'replication slot ' || slot_name FROM pg_replication_slots
 WHERE xmin IS NOT NULL AND age(xmin) >= age(CAST(:xid AS xid))
"""


async def wait_until_dead_to_all(container: Container, xid: int, within_s: float = 180.0) -> None:
    """Wait until what transaction `xid` (committed) updated is dead to every transaction.
    Until then claims re-read those rows whatever their plan: a test of what they read
    would measure the other transaction. (The template's CI runs other suites in other
    databases of the same server at the same time.) Fails naming what held on."""
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        async with container.engine().connect() as conn:
            holders = list((await conn.execute(text(OLDER_HOLDERS), {"xid": xid})).scalars())
        if not holders:
            return
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(
                f"transaction {xid}'s rows stayed visible to older transactions for "
                f"{within_s:.0f}s: {holders}"
            )
        await asyncio.sleep(0.2)


INDEX_READS = {"Index Scan", "Index Only Scan"}


def _relation_scans(node: dict[str, Any], table: str) -> list[str]:
    """Every plan node that reads `table`, by node type, anywhere in the plan tree."""
    kinds = [node["Node Type"]] if node.get("Relation Name") == table else []
    for child in node.get("Plans", []):
        kinds.extend(_relation_scans(child, table))
    return kinds
