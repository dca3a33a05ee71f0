"""The relay's look-ups of delivered items by key (`latest_available`'s superseded items,
coalescing) on real PostgreSQL, on a table whose key index holds every row. Like the claims
(test_claim_plan.py) they are prepared once per connection and soon run on a cached
generic plan. Planned while the table had no page, the old statements were a hash join over
a sequential scan of the whole table, kept for every later look-up (3,700 buffers and 69 ms
for 20 candidates against 300,000 delivered rows, with temp files); now each candidate is a
probe of its key's newer entries in the key index, on the relay's session settings
(store/items.py, NEWER_OF_KEY)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.creation.shards import COALESCE_HEADER, OBJECT_HEADER
from outbox_engine.relay.batch import Slot
from outbox_engine.relay.processor import BoxProcessor
from outbox_engine.store.models import key_index_name
from outbox_engine.store.status import ItemStatus
from outbox_engine.transports.base import ItemRecord

from ..support import OUTBOX_BOX, OutboxItem, make_registry
from .test_claim_plan import (
    autovacuum_back_on,
    buffers,
    explain_cached,
    generic_plan_processor,
    insert_items,
    plan_on_a_pageless_table,
)

TABLE = OutboxItem.__tablename__
ROWS = 100_000  # delivered, 1,000 keys of 100 rows each
KEYS = 1000
STRATEGIES = ["exponential_backoff", "latest_available"]


@pytest.fixture
async def indexed(
    container: Container, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[BoxProcessor]:
    """A processor of the outbox box with `latest_available` (not strict: it needs that), its
    table given the key index of every row (the class says so too), its statements on forced
    generic plans; the index dropped afterwards (the example's layout indexes open rows)."""
    monkeypatch.setattr(OutboxItem, "delivered_key_index", True)
    full = key_index_name(TABLE, delivered=True)
    async with container.engine().connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.execute(text(f"CREATE INDEX IF NOT EXISTS {full} ON {TABLE} (event_key, id)"))
    box = make_registry(outbox={"strict_order": False, "retry_strategies": STRATEGIES}).get(
        OUTBOX_BOX
    )
    processor = generic_plan_processor(container, box)
    assert processor.claimer.reads.lookups_on_index
    processor.filters._lookups = processor._connections  # the forced-generic connections
    try:
        yield processor
    finally:
        await processor.close()
        await autovacuum_back_on(container, TABLE)
        async with container.engine().connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text(f"DROP INDEX IF EXISTS {full}"))


def slot(item_id: int, key: str, event: str, *, retried: bool, obj: str | None = None) -> Slot:
    headers = {} if obj is None else {COALESCE_HEADER: True, OBJECT_HEADER: obj}
    record = ItemRecord(
        item_id, uuid.uuid4(), OUTBOX_BOX, event, key, 0, headers, int(retried), datetime.now(UTC)
    )
    return Slot(record, b"x")


async def test_lookups_planned_on_a_pageless_table_probe_the_key_index(
    indexed: BoxProcessor, container: Container
) -> None:
    processor = indexed
    await plan_on_a_pageless_table(container, TABLE, "left")
    # Plans cached on the pageless table: each look-up run past PostgreSQL's five custom
    # plans (forced generic here anyway).
    for n in range(6):
        kept, dropped = await processor.filters.drop(
            [slot(n + 1, "k", "e", retried=True), slot(n + 2, "k", "e", retried=False, obj="o")]
        )
        assert (len(kept), len(dropped)) == (2, 0)
    delivered = int(ItemStatus.DELIVERED)
    async with container.engine().begin() as conn:
        key = f"(g % {KEYS})::text"
        inserted = await insert_items(
            conn, TABLE, ROWS, key=key, status=str(delivered), payload="'\\x00'"
        )
        assert inserted == ROWS
        # Two newer items of object "7" of key "2" (event "e"): one pending, one delivered.
        await conn.execute(
            text(
                f"INSERT INTO {TABLE} (uuid, event_name, event_key, bucket, status, payload, "
                "headers) SELECT gen_random_uuid(), 'e', '2', 2, s, '\\x00', "
                "jsonb_build_object(CAST(:h AS text), '7') FROM unnest(ARRAY[0, 2]) s"
            ),
            {"h": OBJECT_HEADER},
        )
        first_of_1, second_of_1 = (
            await conn.execute(
                text(f"SELECT id FROM {TABLE} WHERE event_key = '1' ORDER BY id LIMIT 2")
            )
        ).scalars()
        top = (await conn.execute(text(f"SELECT max(id) FROM {TABLE}"))).scalar_one()
    candidates = [
        slot(first_of_1, "1", "e", retried=True),  # 99 newer delivered "e" of key 1: dropped
        slot(second_of_1, "1", "other", retried=True),  # no newer delivered "other": kept
        slot(top + 1, "1", "e", retried=True),  # nothing newer: kept
        slot(5, "absent", "e", retried=True),  # a key without rows: kept
        slot(top - 2, "2", "e", retried=False, obj="7"),  # newer items of object 7: dropped
        slot(top - 3, "2", "e", retried=False, obj="8"),  # none of object 8: kept
    ]
    kept, dropped = await processor.filters.drop(candidates)
    assert [candidates.index(s) for s in dropped] == [0, 4]
    assert [candidates.index(s) for s in kept] == [1, 2, 3, 5]
    reasons = [str(s.outcome.error).split(":")[0] for s in dropped]
    assert reasons == ["latest_available", "coalesced"]

    reads = processor.claimer.reads
    retried = candidates[:4]
    ids = _array([s.item.id for s in retried])
    keys = _array([s.item.event_key for s in retried])
    names = _array([s.item.event_name for s in retried])
    superseded = await explain_cached(
        processor, reads.superseded_sql, f"'{ids}', '{keys}', '{names}'", "ANALYZE, BUFFERS"
    )
    coalescing = candidates[4:]
    coalesced = await explain_cached(
        processor,
        reads.coalesced_sql,
        f"'{_array([top - 2, top - 3])}', '{_array(['2', '2'])}', "
        f"'{_array(['e', 'e'])}', '{_array(['7', '8'])}'",
        "ANALYZE, BUFFERS",
    )
    assert len(coalescing) == 2
    for generic, tree in (superseded, coalesced):
        plan = json.dumps(tree)
        assert generic >= 1, plan  # the plan cached on the pageless table
        assert "Seq Scan" not in plan, plan
        assert "Bitmap" not in plan, plan
        assert f'"Index Name": "{key_index_name(TABLE, delivered=True)}"' in plan, plan
    assert superseded[1][0]["Plan"]["Actual Rows"] == 1
    assert coalesced[1][0]["Plan"]["Actual Rows"] == 1
    # Per candidate, its key's newer entries (at most the 99 of key 1, each checked on its
    # heap page) and a descent: a few hundred buffers at most, where a read of the table
    # (the old plan, whatever the candidates) is over a thousand.
    table_pages = await _pages(container)
    bound = 2 * 100 + 4 * 4
    assert table_pages > 3 * bound, table_pages
    assert buffers(superseded[1]) <= bound, json.dumps(superseded[1])
    assert buffers(coalesced[1]) <= 20, json.dumps(coalesced[1])


async def _pages(container: Container) -> int:
    async with container.engine().connect() as conn:
        size = (await conn.execute(text(f"SELECT pg_relation_size('{TABLE}')"))).scalar_one()
    return int(size) // 8192


def _array(values: list[object]) -> str:
    """A PostgreSQL array literal of plain values (no quoting needed)."""
    return "{" + ",".join(str(v) for v in values) + "}"
