"""The key index of an item table: of every row, or of open rows only (an item class's
`delivered_key_index`, outbox_engine/store/models.py), the revision that switches it
(`schema.switch_key_index`, migrations/versions/0007), and the worker's warning when a
look-up of delivered items by key has no index to read.

Each migration test runs on a database of its own, migrated for it."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.creation.shards import COALESCE_HEADER, OBJECT_HEADER
from outbox_engine.relay.batch import Slot
from outbox_engine.relay.filters import Filters
from outbox_engine.store.items import ItemReads
from outbox_engine.store.models import key_index_name
from outbox_engine.store.pgconn import DriverConnections
from outbox_engine.transports.base import ItemRecord

from ..services import Services
from ..support import (
    OUTBOX_BOX,
    PROJECT_ROOT,
    InboxItem,
    OutboxItem,
    empty_database,
    make_registry,
    migrate,
)

TABLE = OutboxItem.__tablename__
FULL = key_index_name(TABLE, delivered=True)
OPEN = key_index_name(TABLE, delivered=False)
# The revision before the switch (0007): the example tables' key index holds every row.
BEFORE = "0006"


@pytest.fixture
def database(services: Services) -> Iterator[str]:
    with empty_database(services.database_url, "keyidx") as url:
        yield url


def _dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


async def _indexes(url: str) -> dict[str, tuple[str, bool]]:
    """The key indexes of TABLE: name -> (definition, valid)."""
    conn = await asyncpg.connect(_dsn(url))
    try:
        rows = await conn.fetch(
            "SELECT c.relname, pg_get_indexdef(i.indexrelid), i.indisvalid FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = ANY($1::text[])",
            [FULL, OPEN],
        )
    finally:
        await conn.close()
    return {row[0]: (row[1], row[2]) for row in rows}


async def _fill(url: str, count: int, keys: int, status: int = 0) -> None:
    conn = await asyncpg.connect(_dsn(url))
    try:
        await conn.execute(
            f"INSERT INTO {TABLE} (uuid, event_name, event_key, bucket, payload, status) "
            "SELECT gen_random_uuid(), 'e', 'k' || (g % $2), g % 16, '\\x00'::bytea, $3 "
            "FROM generate_series(1, $1) g",
            count,
            keys,
            status,
        )
    finally:
        await conn.close()


async def test_the_switch_goes_both_ways_and_every_row_stays(database: str) -> None:
    migrate(database, BEFORE)
    await _fill(database, 300, keys=3, status=0)
    await _fill(database, 200, keys=3, status=1)
    await _fill(database, 500, keys=3, status=2)
    assert list(await _indexes(database)) == [FULL]

    migrate(database)
    [(definition, valid)] = (await _indexes(database)).values()
    assert definition.endswith("(event_key, id) WHERE ((status = 0) OR (status = 1))")
    assert definition.startswith(f"CREATE INDEX {OPEN} ON")
    assert valid
    conn = await asyncpg.connect(_dsn(database))
    try:
        await conn.execute("SET enable_seqscan = off")
        plan = await conn.fetch(
            f"EXPLAIN SELECT count(*) FROM {TABLE} WHERE event_key = 'k1' AND status = 0"
        )
        # As an index scan or as a bitmap, whichever the statistics of the moment favour.
        plan_text = "\n".join(row[0] for row in plan)
        assert re.search(f"(Scan using|Bitmap Index Scan on) {OPEN}\\b", plan_text), plan_text
        by_status = dict(
            await conn.fetch(
                f"SELECT status, count(*) FROM {TABLE} WHERE event_key = 'k1' GROUP BY status"
            )
        )
    finally:
        await conn.close()
    # 1,000 rows, every third of each status on key k1: the switch touched no row.
    assert by_status == {0: 100, 1: 67, 2: 167}

    migrate(database, BEFORE, down=True)
    [(definition, valid)] = (await _indexes(database)).values()
    assert definition.startswith(f"CREATE INDEX {FULL} ON")
    assert "WHERE" not in definition
    assert valid
    migrate(database)
    assert list(await _indexes(database)) == [OPEN]


async def test_a_build_that_failed_halfway_is_made_again(database: str) -> None:
    """CREATE INDEX CONCURRENTLY that fails leaves an invalid index behind, which PostgreSQL
    keeps up to date but never reads; the switch drops it and builds the index anew."""
    migrate(database, BEFORE)
    await _fill(database, 50, keys=5)
    conn = await asyncpg.connect(_dsn(database))
    try:
        # A unique index on a column with repeats fails after it was created: left invalid.
        with pytest.raises(asyncpg.UniqueViolationError):
            await conn.execute(f'CREATE UNIQUE INDEX CONCURRENTLY "{OPEN}" ON {TABLE} (event_key)')
    finally:
        await conn.close()
    assert (await _indexes(database))[OPEN][1] is False

    migrate(database)
    [(definition, valid)] = (await _indexes(database)).values()
    assert valid
    assert definition == (
        f"CREATE INDEX {OPEN} ON public.{TABLE} USING btree (event_key, id) "
        "WHERE ((status = 0) OR (status = 1))"
    )


@pytest.mark.parametrize(("revision", "grows"), [(BEFORE, True), ("head", False)])
async def test_a_delivered_row_enters_the_key_index_only_if_it_holds_delivered_rows(
    database: str, revision: str, grows: bool
) -> None:
    """Marking items delivered cannot be a HOT update (the partial indexes read `status`):
    every index that takes the row's new version grows, the index of open rows does not
    change by a byte."""
    migrate(database, revision)
    await _fill(database, 20_000, keys=1_000)
    conn = await asyncpg.connect(_dsn(database))
    try:
        await conn.execute(f"VACUUM {TABLE}")
        sizes = "SELECT pg_relation_size($1::regclass), pg_relation_size($2::regclass)"
        key_index = FULL if grows else OPEN
        before = await conn.fetchrow(sizes, key_index, f"pk_{TABLE}")
        updated = await conn.execute(f"UPDATE {TABLE} SET status = 2, processed_at = now()")
        after = await conn.fetchrow(sizes, key_index, f"pk_{TABLE}")
    finally:
        await conn.close()
    assert updated == "UPDATE 20000"
    assert after[1] > before[1] * 1.5  # the primary key takes every new version
    if grows:
        # Each new version's entry repeats the old one's (event_key, id): B-tree
        # deduplication folds most of them into posting lists, so it grows by less.
        assert after[0] > before[0]
    else:
        assert after[0] == before[0]


def test_offline_the_switch_is_a_script_that_creates_what_is_missing() -> None:
    """`alembic upgrade --sql` writes SQL for a DBA to run: no database to ask whether an
    index is there, so each statement is one that can run twice."""
    result = subprocess.run(
        [sys.executable, "-m", "alembic", "upgrade", f"{BEFORE}:head", "--sql"],
        cwd=PROJECT_ROOT,
        env={**os.environ, "DATABASE_URL": "postgresql+asyncpg://nobody@127.0.0.1:1/none"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    statements = [line for line in result.stdout.splitlines() if "INDEX CONCURRENTLY" in line]
    expected = []
    for cls in (OutboxItem, InboxItem):
        table = cls.__tablename__
        expected += [
            f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "ix_{table}_open_key_id" ON "{table}" '
            "(event_key, id) WHERE status = 0 OR status = 1;",
            f'DROP INDEX CONCURRENTLY IF EXISTS "ix_{table}_event_key_id";',
        ]
    assert statements == expected


def _filters(container: Container, **config: Any) -> Filters:
    box = make_registry(outbox=config).get(OUTBOX_BOX)
    reads = ItemReads(
        box.table_name,
        inbox=False,
        strict_order=box.config.strict_order,
        object_header=OBJECT_HEADER,
        delivered_key_index=box.item_class.delivered_key_index,
    )
    engine = container.engine()
    return Filters(box, reads, DriverConnections(engine, keep=False), engine, None)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "delivered items by key" in r.getMessage()
    ]


async def test_latest_available_on_a_box_without_the_index_is_warned_about_once(
    container: Container, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="outbox_engine.relay.worker")
    strategies = {
        "strict_order": False,
        "retry_strategies": ["exponential_backoff", "latest_available"],
    }
    _filters(container, **strategies)
    [warning] = _warnings(caplog)
    assert warning == (
        f"box {OUTBOX_BOX}: latest_available looks up delivered items by key, and {TABLE}'s "
        f"key index holds open items only ({OutboxItem.__name__}.delivered_key_index = False): "
        "the answers are the same, from a slower plan that grows with the table. Set "
        f"{OutboxItem.__name__}.delivered_key_index = True and migrate with "
        f'switch_key_index("{TABLE}", delivered=True) (docs/operations.md)'
    )
    caplog.clear()
    _filters(container)  # exponential_backoff alone reads no delivered row
    monkeypatch.setattr(OutboxItem, "delivered_key_index", True)
    _filters(container, **strategies)
    assert _warnings(caplog) == []


async def test_coalescing_on_a_box_without_the_index_is_warned_about_at_its_first_batch(
    container: Container, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="outbox_engine.relay.worker")

    def slot(item_id: int, coalesce: bool) -> Slot:
        headers = {COALESCE_HEADER: True, OBJECT_HEADER: "7"} if coalesce else {}
        record = ItemRecord(
            item_id, uuid.uuid4(), OUTBOX_BOX, "e", "k", 0, headers, 0, datetime.now(UTC)
        )
        return Slot(record, b"x")

    filters = _filters(container)
    kept, dropped = await filters.drop([slot(1, False)])
    assert (len(kept), len(dropped), _warnings(caplog)) == (1, 0, [])
    for first in (2, 4):
        kept, dropped = await filters.drop([slot(first, True), slot(first + 1, False)])
        assert (len(kept), len(dropped)) == (2, 0)
    [warning] = _warnings(caplog)
    assert warning.startswith(f"box {OUTBOX_BOX}: coalescing looks up delivered items by key")

    caplog.clear()
    monkeypatch.setattr(OutboxItem, "delivered_key_index", True)
    await _filters(container).drop([slot(6, True)])
    assert _warnings(caplog) == []
