"""The kill switch: pauses stored in PostgreSQL and honoured by running workers."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from sqlalchemy import func, select

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.config.registry import Box
from outbox_engine.store.pauses import (
    PauseReader,
    add_pause,
    list_pauses,
    remove_pause,
)
from outbox_engine.store.status import ItemStatus

from ..support import (
    CALLS,
    OUTBOX_BOX,
    OutboxItem,
    RecordingTransport,
    make_registry,
    reset_transports,
    running_worker,
    transport,
    wait_for,
)

# The workers' PauseReader re-reads the pauses every 2 s: a pause holds after this long.
HONOURED_WITHIN = 2.5


@pytest.fixture(autouse=True)
def _reset() -> None:
    reset_transports()


def recording() -> dict[str, object]:
    return {"transports": [transport(RecordingTransport, name="p")], "retry_strategies": []}


async def create(container: Container, keys: Sequence[str]) -> None:
    async with container.session_factory()() as session, session.begin():
        await container.outbox().create_batch(
            session,
            OutboxItem,
            [
                {"event_key": k, "event_name": "paused_test", "payload": {"n": i}}
                for i, k in enumerate(keys)
            ],
        )


async def counts(container: Container, key: str | None = None) -> dict[int, int]:
    query = select(OutboxItem.status, func.count()).group_by(OutboxItem.status)
    if key is not None:
        query = query.where(OutboxItem.event_key == key)
    async with container.session_factory()() as session:
        return {int(s): int(n) for s, n in (await session.execute(query)).all()}


def delivered_keys() -> list[str]:
    return [key for key, _id, _payload in CALLS["p"]]


def same_bucket_keys(box: Box) -> tuple[str, str]:
    first = "1"
    other = next(
        str(n) for n in range(2, 10_000) if box.bucket_for(str(n)) == box.bucket_for(first)
    )
    return first, other


async def test_pauses_are_stored_once_per_target_and_lifted_exactly(container: Container) -> None:
    engine = container.engine()
    assert await add_pause(engine, OUTBOX_BOX, reason="incident 42")
    assert not await add_pause(engine, OUTBOX_BOX, reason="again")  # one pause per target
    assert await add_pause(engine, OUTBOX_BOX, bucket=3)
    assert await add_pause(engine, OUTBOX_BOX, event_key="k-1")
    assert await add_pause(engine, "other_box", event_key="k-1")
    with pytest.raises(ValueError, match="not both"):
        await add_pause(engine, OUTBOX_BOX, bucket=1, event_key="k")
    pauses = await list_pauses(engine, OUTBOX_BOX)
    assert [p.target for p in pauses] == [
        f"box {OUTBOX_BOX}",
        f"bucket 3 of box {OUTBOX_BOX}",
        f"key 'k-1' of box {OUTBOX_BOX}",
    ]
    assert pauses[0].reason == "incident 42"
    # Lifting the key pause leaves the box and bucket pauses (and the other box) alone.
    assert await remove_pause(engine, OUTBOX_BOX, event_key="k-1") == 1
    assert await remove_pause(engine, OUTBOX_BOX, event_key="k-1") == 0
    assert len(await list_pauses(engine, OUTBOX_BOX)) == 2
    assert await remove_pause(engine, OUTBOX_BOX, every=True) == 2
    assert [p.box for p in await list_pauses(engine)] == ["other_box"]


async def test_the_reader_caches_and_refreshes(container: Container) -> None:
    engine = container.engine()
    reader = PauseReader(engine, refresh_seconds=0.3)
    assert not (await reader.current()).box_paused(OUTBOX_BOX)
    await add_pause(engine, OUTBOX_BOX, bucket=2)
    await add_pause(engine, OUTBOX_BOX, event_key="hot")
    assert (await reader.current()).paused_buckets(OUTBOX_BOX) == frozenset()  # cached
    await asyncio.sleep(0.35)
    current = await reader.current()
    assert current.paused_buckets(OUTBOX_BOX) == {2}
    assert current.paused_keys(OUTBOX_BOX) == {"hot"}
    assert not current.box_paused(OUTBOX_BOX)


async def test_a_paused_box_waits_and_a_resumed_one_delivers(container: Container) -> None:
    registry = make_registry(outbox=recording())
    async with running_worker(container, registry, boxes=[OUTBOX_BOX]):
        await create(container, ["1"])
        await wait_for(lambda: _done(container, 1))
        await add_pause(container.engine(), OUTBOX_BOX, reason="test")
        await asyncio.sleep(HONOURED_WITHIN)  # the running worker notices within seconds
        await create(container, [str(n) for n in range(50)])
        await asyncio.sleep(1.5)
        assert len(delivered_keys()) == 1
        assert (await counts(container)).get(int(ItemStatus.PENDING)) == 50
        await remove_pause(container.engine(), OUTBOX_BOX)
        await wait_for(lambda: _done(container, 51), within=15)
    assert len(delivered_keys()) == 51


async def test_a_paused_bucket_waits_while_other_buckets_deliver(container: Container) -> None:
    registry = make_registry(outbox=recording())
    box = registry.get(OUTBOX_BOX)
    paused_key = "5"
    other_keys = [str(n) for n in range(40) if box.bucket_for(str(n)) != box.bucket_for(paused_key)]
    await add_pause(container.engine(), OUTBOX_BOX, bucket=box.bucket_for(paused_key))
    async with running_worker(container, registry, boxes=[OUTBOX_BOX]):
        await create(container, [paused_key] * 10 + other_keys)
        await wait_for(lambda: _done(container, len(other_keys)))
        await asyncio.sleep(1.0)
        assert paused_key not in delivered_keys()
        assert await counts(container, paused_key) == {int(ItemStatus.PENDING): 10}
        await remove_pause(container.engine(), OUTBOX_BOX, bucket=box.bucket_for(paused_key))
        await wait_for(lambda: _done(container, len(other_keys) + 10), within=15)


async def test_a_paused_hot_key_stays_untouched_and_its_bucket_moves_on(
    container: Container,
) -> None:
    """More items of the paused key than one claim reads from a bucket must not starve the
    other keys of that bucket: paused keys are filtered in the claim itself."""
    registry = make_registry(outbox=recording())
    hot, neighbour = same_bucket_keys(registry.get(OUTBOX_BOX))
    await add_pause(container.engine(), OUTBOX_BOX, event_key=hot, reason="hot shard")
    async with running_worker(container, registry, boxes=[OUTBOX_BOX]):
        await create(container, [hot] * 1200 + [neighbour] * 5)
        await wait_for(lambda: _done(container, 5))
        await asyncio.sleep(1.0)
        assert delivered_keys() == [neighbour] * 5
        async with container.session_factory()() as session:
            untouched = await session.execute(
                select(func.count())
                .select_from(OutboxItem)
                .where(
                    OutboxItem.event_key == hot,
                    OutboxItem.status == int(ItemStatus.PENDING),
                    OutboxItem.errors_count == 0,
                    OutboxItem.next_attempt_at.is_(None),
                )
            )
            assert untouched.scalar_one() == 1200
        await remove_pause(container.engine(), OUTBOX_BOX, event_key=hot)
        await wait_for(lambda: _done(container, 1205), within=30)
    ids = [item_id for key, item_id, _ in CALLS["p"] if key == hot]
    assert ids == sorted(ids)  # the key's order holds across the pause


async def _done(container: Container, delivered: int) -> bool:
    return (await counts(container)).get(int(ItemStatus.DELIVERED), 0) >= delivered
