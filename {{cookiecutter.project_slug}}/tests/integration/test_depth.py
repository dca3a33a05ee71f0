"""The depth gauges' reads (outbox_engine/store/depth.py) on real PostgreSQL: what they count
(pending items only, items in backoff among them), the deepest bucket, the oldest pending
item's age by id within each bucket, and that they read the pending index, not the items."""

from __future__ import annotations

import json
import logging
import types
from typing import Any, cast

import pytest
from sqlalchemy import text

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.config.registry import Box
from outbox_engine.observability.observer import Observer
from outbox_engine.relay.depth_gauges import DepthGauges
from outbox_engine.relay.processor import RELAY_SESSION_SETTINGS
from outbox_engine.store.depth import COUNTS_SQL, OLDEST_SQL, Depth, sample_depth
from outbox_engine.store.pgconn import DriverConnections
from outbox_engine.store.status import ItemStatus

from ..support import OUTBOX_BOX, OutboxItem, make_registry
from .test_claim_plan import buffers, insert_items

TABLE = OutboxItem.__tablename__
PENDING, FAILED, DELIVERED = (
    int(ItemStatus.PENDING),
    int(ItemStatus.FAILED),
    int(ItemStatus.DELIVERED),
)

# (bucket, status, seconds since created, retry due in seconds or None), inserted in this
# order: ids ascend down the list.
ROWS = [
    (0, PENDING, 10, None),
    (0, PENDING, 10, None),
    (0, PENDING, 10, None),
    (0, PENDING, 10, None),
    (5, PENDING, 120, None),  # the oldest pending item
    (5, PENDING, 30, None),
    (7, DELIVERED, 900, None),  # closed: not counted, however old
    (7, DELIVERED, 900, None),
    (7, FAILED, 900, None),
    (7, PENDING, 60, 3600),  # in backoff: still pending
    (9, PENDING, 20, None),
    (9, PENDING, 500, None),  # older, but a later id of its bucket: not seen (see depth.py)
]


async def _insert(container: Container) -> None:
    async with container.engine().begin() as conn:
        for bucket, status, age, retry in ROWS:
            await conn.execute(
                text(
                    f"INSERT INTO {TABLE} (uuid, event_name, event_key, bucket, status, payload, "
                    "created_at, next_attempt_at) VALUES (gen_random_uuid(), 'e', :k, :b, "
                    ":s, '\\x00', now() - make_interval(secs => :age), "
                    "now() + make_interval(secs => CAST(:retry AS float8)))"
                ),
                {"k": f"k{bucket}", "b": bucket, "s": status, "age": age, "retry": retry},
            )


async def _sample(container: Container) -> Depth:
    connections = DriverConnections(container.engine(), settings=RELAY_SESSION_SETTINGS)
    async with connections.acquire() as conn:
        return await sample_depth(conn, TABLE)


async def test_an_empty_box_has_no_depth(container: Container) -> None:
    assert await _sample(container) == Depth(0, 0.0, 0)


async def test_pending_items_are_counted_and_the_oldest_is_by_id_in_each_bucket(
    container: Container,
) -> None:
    await _insert(container)
    depth = await _sample(container)
    assert depth.pending == 4 + 2 + 1 + 2
    assert depth.deepest_bucket == 4
    # Bucket 5's first item, 120 s old; bucket 9's second item (500 s) is not the first of
    # its bucket by id, so it is not seen: the documented limit, a transaction's length.
    assert 120 <= depth.oldest_seconds < 125, depth


async def _explain(container: Container, sql: str, *args: Any) -> Any:
    connections = DriverConnections(container.engine(), settings=RELAY_SESSION_SETTINGS)
    async with connections.acquire() as conn:
        plan = await conn.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", *args)
    return json.loads(plan) if isinstance(plan, str) else plan


async def test_a_sample_reads_the_pending_index_not_the_items(container: Container) -> None:
    """20,000 pending items of 1 KB in 16 buckets (and 20,000 delivered ones): the counts
    pass over the pending index, the oldest is a descent per bucket. The old statements
    read every pending item's heap tuple for `min(created_at)`."""
    async with container.engine().begin() as conn:
        bucket = "g % 16"
        await insert_items(conn, TABLE, 20_000, bucket=bucket, status=str(DELIVERED))
        await insert_items(conn, TABLE, 20_000, bucket=bucket)
    async with container.engine().connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.execute(text(f"VACUUM ANALYZE {TABLE}"))
        size = await conn.execute(text(f"SELECT pg_relation_size('{TABLE}') / 8192"))
        pages = int(size.scalar_one())
    depth = await _sample(container)
    assert (depth.pending, depth.deepest_bucket) == (20_000, 1250)
    counts = await _explain(container, COUNTS_SQL.format(table=TABLE, pending=PENDING))
    oldest = await _explain(container, OLDEST_SQL.format(table=TABLE), list(range(16)))
    for tree in (counts, oldest):
        plan = json.dumps(tree)
        assert f'"Index Name": "ix_{TABLE}_pending"' in plan, plan
        assert "Seq Scan" not in plan, plan
        assert '"Node Type": "Bitmap' not in plan, plan
    read = [buffers(tree) for tree in (counts, oldest)]
    # The pending index of 20,000 entries is ~60 pages; the items' heap is over 5,000.
    assert pages > 5000, pages
    assert read[0] <= 200, (read, json.dumps(counts))
    assert read[1] <= 16 * 4, (read, json.dumps(oldest))


class Gauges(Observer):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, int, int]] = []

    def depth(self, box: Box, pending: int, oldest_age_seconds: float, deepest_bucket: int) -> None:
        self.seen.append((box.name, pending, deepest_bucket))


async def test_a_box_whose_table_is_missing_does_not_stop_the_others(
    container: Container, caplog: pytest.LogCaptureFixture
) -> None:
    """One round samples every box on one connection; a box whose statement the database
    refuses (no such table: a migration not yet run) is logged, and the boxes after it are
    still sampled, on the same round."""
    await _insert(container)
    ghost = cast(Box, types.SimpleNamespace(name="ghost_box", table_name="no_such_items"))
    real = make_registry().get(OUTBOX_BOX)
    observer = Gauges()
    gauges = DepthGauges(container.engine(), [ghost, real], observer)
    caplog.set_level(logging.WARNING, logger="outbox_engine.relay.worker")
    await gauges.sample()
    assert observer.seen == [(OUTBOX_BOX, 9, 4)]
    [warning] = [r.getMessage() for r in caplog.records if "cannot sample" in r.getMessage()]
    assert warning.startswith("box ghost_box: cannot sample depth (relation"), warning
    assert "no_such_items" in warning
