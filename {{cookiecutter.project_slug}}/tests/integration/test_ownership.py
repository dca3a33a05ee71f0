"""Bucket ownership across boxes (store/ownership.py): one read of the advisory locks per
rebalance tick serves every box, and each box is still split on its own."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import asyncpg  # type: ignore[import-untyped]

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.relay.worker import Worker
from outbox_engine.store.ownership import LOCK_SUMMARY_SQL, MAX_MEMBERS, MEMBER_BASE

from ..support import (
    INBOX_BOX,
    OUTBOX_BOX,
    RecordingTransport,
    make_registry,
    running_worker,
    transport,
    wait_for,
)


def _split(first: Worker, second: Worker, box: str, buckets: int) -> bool:
    a = first.ownership.boxes[box].owned
    b = second.ownership.boxes[box].owned
    return not (a & b) and len(a | b) == buckets and abs(len(a) - len(b)) <= 1


async def test_two_workers_split_each_of_two_boxes_and_one_takes_both_back(
    container: Container,
) -> None:
    registry = make_registry(
        outbox={"transports": [transport(RecordingTransport, name="o")], "bucket_count": 16},
        inbox={"bucket_count": 7},
    )
    boxes = [OUTBOX_BOX, INBOX_BOX]
    sizes = {box: registry.get(box).config.bucket_count for box in boxes}
    assert sizes == {OUTBOX_BOX: 16, INBOX_BOX: 7}
    async with running_worker(container, registry, boxes) as first:

        async def first_owns_all() -> bool:
            return all(len(first.ownership.boxes[b].owned) == n for b, n in sizes.items())

        await wait_for(first_owns_all, within=10)
        async with running_worker(container, registry, boxes) as second:

            async def both_split() -> bool:
                return all(_split(first, second, b, n) for b, n in sizes.items())

            await wait_for(both_split, within=10)
            # 16 buckets: 8 + 8; 7 buckets: 4 + 3.
            assert sorted(len(w.ownership.boxes[OUTBOX_BOX].owned) for w in (first, second)) == [
                8,
                8,
            ]
            assert sorted(len(w.ownership.boxes[INBOX_BOX].owned) for w in (first, second)) == [
                3,
                4,
            ]
        await wait_for(first_owns_all, within=10)


@asynccontextmanager
async def _connection(dsn: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(dsn)
    try:
        yield conn
    finally:
        await conn.close()


async def test_the_lock_summary_counts_members_and_names_only_the_buckets_others_hold(
    container: Container,
) -> None:
    """The rebalance tick's one read: per namespace asked for, the live members (this
    session included) and exactly the buckets held by other sessions; namespaces not
    asked for, a lock's other key kinds and a namespace with no locks are not in it."""
    dsn = container.settings().asyncpg_dsn
    # Random namespaces, so that workers of other tests (same database) cannot interfere.
    first, second, quiet, other = random.sample(range(1, 2**31), 4)
    async with AsyncExitStack() as stack:
        me, peer, third = [await stack.enter_async_context(_connection(dsn)) for _ in range(3)]
        lock = "SELECT pg_advisory_lock($1, $2)"
        # first: three members; buckets 0 and the highest bucket number mine, 5 and 63 the
        # peer's, 9 the third's. second: only my member lock. other: the peer's, not asked.
        for conn, ns, key in [
            (me, first, MEMBER_BASE),
            (me, first, 0),
            (me, first, MEMBER_BASE - 1),
            (peer, first, MEMBER_BASE + 1),
            (peer, first, 5),
            (peer, first, 63),
            (third, first, MEMBER_BASE + MAX_MEMBERS - 1),
            (third, first, 9),
            (me, second, MEMBER_BASE + 2),
            (peer, other, 1),
        ]:
            await conn.execute(lock, ns, key)
        # A one-key advisory lock on the same number is another kind (objsubid 1).
        await peer.execute("SELECT pg_advisory_lock($1)", first)

        rows = await me.fetch(LOCK_SUMMARY_SQL, [first, second, quiet])
        summary = {r["ns"]: (r["members"], sorted(r["elsewhere"])) for r in rows}
        assert summary == {first: (3, [5, 9, 63]), second: (1, [])}
        rows = await peer.fetch(LOCK_SUMMARY_SQL, [first])
        assert [(r["members"], sorted(r["elsewhere"])) for r in rows] == [
            (3, [0, 9, MEMBER_BASE - 1])
        ]
