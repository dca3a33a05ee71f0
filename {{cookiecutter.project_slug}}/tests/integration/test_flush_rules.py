"""The synchronous flush keeps the worker's rules (real PostgreSQL and Kafka): bucket
ownership (the owner delivers, the flush waits for it), strict order, pauses; and a
backfill never lets a stale snapshot win over a newer item of the same object."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select, text, update

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.config.registry import BoxRegistry
from outbox_engine.sharding.backfill import backfill
from outbox_engine.sharding.flush import Flusher
from outbox_engine.store.pauses import add_pause
from outbox_engine.store.status import ItemStatus

from ..replicated import Thing, things  # noqa: F401 - fixture
from ..support import (
    CALLS,
    OUTBOX_BOX,
    OutboxItem,
    RecordingTransport,
    make_registry,
    reset_transports,
    running_worker,
    transport,
)


@pytest.fixture(autouse=True)
def _reset() -> None:
    reset_transports()


def _registry(name: str) -> BoxRegistry:
    return make_registry(
        outbox={"transports": [transport(RecordingTransport, name=name)], "retry_strategies": []}
    )


async def test_a_flush_leaves_an_owned_bucket_to_its_worker_and_waits_for_it(
    container: Container,
) -> None:
    flusher = Flusher(_registry("flush"), container.resources(), container.middlewares())
    async with (
        running_worker(container, _registry("worker")),
        container.session_factory()() as session,
        flusher.context(session) as ctx,
    ):
        created = [
            await container.outbox().create(
                session, OutboxItem, event_key=str(n), event_name="e", payload=b"%d" % n
            )
            for n in range(3)
        ]
    assert [ctx.outcomes[i].status for i in created] == ["delivered"] * 3
    assert sorted(p for _, _, p in CALLS["worker"]) == [b"0", b"1", b"2"]
    assert CALLS["flush"] == []  # the flush never sent what a worker owns


async def test_a_flush_delivers_only_an_item_that_heads_its_key_in_a_strict_box(
    container: Container,
) -> None:
    registry = _registry("flush")
    assert registry.get(OUTBOX_BOX).config.strict_order
    flusher = Flusher(registry, container.resources(), container.middlewares())
    outbox = container.outbox()
    async with container.session_factory()() as session, session.begin():
        head = await outbox.create(session, OutboxItem, event_key="7", event_name="e", payload=b"h")
    async with container.session_factory()() as session, session.begin():
        await session.execute(
            update(OutboxItem)
            .where(OutboxItem.uuid == head)
            .values(status=int(ItemStatus.FAILED), errors_count=3)
        )
    async with container.session_factory()() as session, flusher.context(session) as ctx:
        behind = await outbox.create(
            session, OutboxItem, event_key="7", event_name="e", payload=b"b"
        )
        other = await outbox.create(
            session, OutboxItem, event_key="8", event_name="e", payload=b"o"
        )
    assert ctx.outcomes[behind].status == "pending"
    assert "older item of its key" in (ctx.outcomes[behind].error or "")
    assert ctx.outcomes[other].status == "delivered"
    assert [p for _, _, p in CALLS["flush"]] == [b"o"]


async def test_a_flush_sends_nothing_of_a_paused_box_bucket_or_key(container: Container) -> None:
    registry = _registry("flush")
    box = registry.get(OUTBOX_BOX)
    flusher = Flusher(registry, container.resources(), container.middlewares())
    outbox = container.outbox()
    await add_pause(container.engine(), box.name, event_key="1")
    await add_pause(container.engine(), box.name, bucket=box.bucket_for("2"))
    async with container.session_factory()() as session, flusher.context(session) as ctx:
        ids = [
            await outbox.create(
                session, OutboxItem, event_key=k, event_name="e", payload=k.encode()
            )
            for k in ("1", "2", "3")
        ]
    assert [ctx.outcomes[i].status for i in ids] == ["pending", "pending", "delivered"]
    assert [p for _, _, p in CALLS["flush"]] == [b"3"]
    await add_pause(container.engine(), box.name)
    flusher = Flusher(registry, container.resources(), container.middlewares())  # fresh pauses
    async with container.session_factory()() as session, flusher.context(session) as paused:
        later = await outbox.create(
            session, OutboxItem, event_key="3", event_name="e", payload=b"x"
        )
    assert paused.outcomes[later].status == "pending"
    assert paused.outcomes[later].error == f"box {box.name} is paused"
    assert len(CALLS["flush"]) == 1


@pytest.mark.usefixtures("things")
async def test_a_backfill_never_emits_a_snapshot_older_than_a_concurrent_update(
    container: Container,
) -> None:
    """An update of row R is in flight (R locked, its item inserted, not committed) when a
    backfill reaches R. The backfill waits for it and emits the new data: the newest item of
    R (the one coalescing delivers) carries the committed value."""
    async with container.session_factory()() as session, session.begin():
        session.add(Thing(account_id=1, name="v1"))
    async with container.session_factory()() as updater:
        await updater.begin()
        thing = (await updater.execute(select(Thing))).scalar_one()
        thing.name = "v2"
        await updater.flush()  # UPDATE + its item, uncommitted
        task = asyncio.create_task(
            backfill(
                container.session_factory(),
                container.engine(),
                container.registry(),
                Thing,
                name="stale-test",
                batch_size=100,
            )
        )
        # Until the backfill has either finished (read v1: the bug) or waits for the row.
        for _ in range(500):
            if task.done() or await _waits_for_a_row_lock(container):
                break
            await asyncio.sleep(0.02)
        waited = not task.done()
        await updater.commit()
    report = await asyncio.wait_for(task, 30)
    assert waited
    assert report.emitted == 1
    async with container.session_factory()() as session:
        payloads = (
            (await session.execute(select(OutboxItem.payload).order_by(OutboxItem.id)))
            .scalars()
            .all()
        )
    assert len(payloads) == 3  # insert, update, backfill
    assert b'"name":"v2"' in payloads[-1]
    assert b'"operation":"backfill"' in payloads[-1]


async def _waits_for_a_row_lock(container: Container) -> bool:
    async with container.engine().connect() as conn:
        waiting = await conn.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND query LIKE '%replicated_things%'"
            )
        )
        return bool(waiting.scalar_one())
