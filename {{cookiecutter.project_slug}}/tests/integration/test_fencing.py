"""Fencing and ordering at the edges (real PostgreSQL and Kafka): a worker that lost its
buckets cannot undo or repeat another worker's work, and a key in backoff holds back only
itself."""

from __future__ import annotations

import asyncio
import time

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy import select, text

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.middleware import Middlewares
from outbox_engine.relay.processor import BoxProcessor
from outbox_engine.relay.worker import Worker
from outbox_engine.store.record import FailedAttempt, Recorder
from outbox_engine.store.status import ItemStatus
from outbox_engine.transports.base import InboxHandler, ItemRecord

from ..support import (
    CALLS,
    FAILURES,
    INBOX_BOX,
    OUTBOX_BOX,
    InboxItem,
    OutboxItem,
    make_registry,
    reset_transports,
    running_worker,
    transport,
    wait_for,
)
from .test_relay import create, recording, statuses

EFFECTS: list[int] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    reset_transports()
    EFFECTS.clear()


class SlowCountingHandler(InboxHandler):
    """Counts every application of an item (a second one is a double effect)."""

    async def handle(self, item: ItemRecord, payload: bytes, session: object) -> bool:
        await asyncio.sleep(0.01)
        EFFECTS.append(item.id)
        return True


async def _insert_inbox(container: Container, count: int, keys: int) -> None:
    async with container.engine().begin() as conn:
        await conn.execute(
            text(
                f"INSERT INTO {InboxItem.__tablename__} (uuid, event_name, event_key, bucket, payload) "
                "SELECT gen_random_uuid(), 'e', (n % :keys)::text, 0, '{}'::bytea "
                "FROM generate_series(1, :count) AS n"
            ),
            {"keys": keys, "count": count},
        )


async def test_two_workers_holding_one_bucket_never_both_apply_an_inbox_item(
    container: Container,
) -> None:
    """The bucket changed hands while the old owner still had a batch in flight: both
    claim the same 200 items and handle them at the same time. Each is applied once."""
    EFFECTS.clear()
    registry = make_registry(
        inbox={"bucket_count": 1, "transports": [transport(SlowCountingHandler)]}
    )
    box = registry.get(INBOX_BOX)
    await _insert_inbox(container, 200, keys=20)
    old, new = (
        BoxProcessor(box, container.engine(), container.session_factory(), Middlewares())
        for _ in range(2)
    )
    reports = await asyncio.gather(old.run_once([0]), new.run_once([0]))
    assert [r.claimed for r in reports] == [200, 200]
    assert sorted(EFFECTS) == sorted(set(EFFECTS))  # nothing applied twice
    # The one that lost each race saw the row locked or already handled: fenced, counted.
    assert old.fenced_total + new.fenced_total >= 1
    # What one of them skipped the next batch applies; still once each.
    while True:
        report = await new.run_once([0])
        if not report.claimed:
            break
    async with container.session_factory()() as session:
        rows = (await session.execute(select(InboxItem.status))).scalars().all()
    assert rows.count(ItemStatus.DELIVERED) == 200
    assert len(EFFECTS) == 200
    assert len(set(EFFECTS)) == 200


async def test_a_stale_failure_never_moves_a_delivered_item_back_to_pending(
    container: Container,
) -> None:
    registry = make_registry(outbox=recording())
    box = registry.get(OUTBOX_BOX)
    await create(container, [("1", "e", b"a"), ("2", "e", b"b")])
    recorder = Recorder(box.table_name, box.name)
    conn = await asyncpg.connect(container.settings().asyncpg_dsn)
    try:
        # The new owner delivered item 1; the old owner then records its failed attempt of
        # item 1 (claimed at errors_count 0) and of item 2 with a stale attempt count.
        await recorder.record(conn, [1], [], [])
        stale = [
            FailedAttempt(1, 0, 1, ItemStatus.PENDING, "boom", 60.0),
            FailedAttempt(2, 3, 4, ItemStatus.PENDING, "boom", 60.0),
        ]
        recorded = await recorder.record(conn, [], stale, [(1, "discarded by a stale owner")])
        assert recorded.fenced == 3
        # An attempt that matches the claim applies; the same one again is fenced.
        fresh = [FailedAttempt(2, 0, 1, ItemStatus.PENDING, "boom", 60.0)]
        assert (await recorder.record(conn, [], fresh, [])).fenced == 0
        assert (await recorder.record(conn, [], fresh, [])).fenced == 1
        assert (await recorder.record(conn, [1, 2], [], [])).fenced == 1
    finally:
        await conn.close()
    assert await statuses(container) == {
        1: (ItemStatus.DELIVERED, 0, None),
        2: (ItemStatus.DELIVERED, 1, "boom"),
    }


async def _lock_backend(container: Container) -> int:
    async with container.engine().connect() as conn:
        pids = (
            (
                await conn.execute(
                    text(
                        "SELECT DISTINCT l.pid FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                        "WHERE l.locktype = 'advisory' AND l.granted "
                        "AND a.datname = current_database()"
                    )
                )
            )
            .scalars()
            .all()
        )
    assert len(pids) == 1, pids
    return int(pids[0])


async def test_a_worker_that_loses_its_lock_connection_stops_at_once_and_comes_back(
    container: Container,
) -> None:
    registry = make_registry(outbox=recording())
    buckets = registry.get(OUTBOX_BOX).config.bucket_count
    async with running_worker(container, registry, rebalance_interval=60.0) as worker:
        state = worker.ownership.boxes[OUTBOX_BOX]
        await wait_for(lambda: _owns(state.owned, buckets), within=10)
        pid = await _lock_backend(container)
        started = time.monotonic()
        async with container.engine().connect() as conn:
            await conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        await wait_for(lambda: _lost(worker), within=2, interval=0.005)
        assert time.monotonic() - started < 2
        assert not state.owned
        # Reconnects at once (not at the 60 s tick) and takes its buckets back.
        await wait_for(lambda: _owns(state.owned, buckets), within=10)
        # Ready again once that rebalance has finished (its last bucket is owned a moment
        # before it returns).
        await wait_for(lambda: _ready(worker), within=5)
        assert await _lock_backend(container) != pid
        await create(container, [("1", "e", b"after")])
        await wait_for(lambda: _delivered(container, 1), within=10)
    assert worker.ownership.losses == 1


async def _owns(owned: set[int], count: int) -> bool:
    return len(owned) == count


async def _lost(worker: Worker) -> bool:
    return worker.ownership.losses == 1


async def _ready(worker: Worker) -> bool:
    return worker.ready.is_set()


async def _delivered(container: Container, count: int) -> bool:
    async with container.session_factory()() as session:
        rows = (await session.execute(select(OutboxItem.status))).scalars().all()
    return rows.count(ItemStatus.DELIVERED) == count


async def test_a_key_in_backoff_does_not_starve_the_other_keys_of_its_bucket(
    container: Container,
) -> None:
    """A claim of 10: key A's head fails and waits a minute with 50 items behind it. The
    items of key B, in the same bucket and created after all of them, still go at once."""
    registry = make_registry(
        outbox=recording(
            batch_size=10,
            max_retries=5,
            backoff={"min_seconds": 60, "max_seconds": 60, "jitter": 0},
        )
    )
    box = registry.get(OUTBOX_BOX)
    key_a = "1"
    key_b = next(
        k for k in map(str, range(2, 10_000)) if box.bucket_for(k) == box.bucket_for(key_a)
    )
    FAILURES["t"] = 1
    await create(container, [(key_a, "e", b"a-%d" % n) for n in range(51)])
    await create(container, [(key_b, "e", b"b-%d" % n) for n in range(5)])
    async with running_worker(container, registry):
        await wait_for(lambda: _delivered(container, 5), within=10)
        await asyncio.sleep(0.5)
    assert [p for k, _, p in CALLS["t"] if k == key_b] == [b"b-%d" % n for n in range(5)]
    assert [p for k, _, p in CALLS["t"] if k == key_a] == [b"a-0"]  # only the failed head
    rows = await statuses(container)
    assert rows[1] == (ItemStatus.PENDING, 1, "RuntimeError: transport failed (test)")
    assert sum(1 for status, _, _ in rows.values() if status == ItemStatus.PENDING) == 51
