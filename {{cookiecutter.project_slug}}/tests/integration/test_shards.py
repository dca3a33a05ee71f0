"""Sentry-style outboxes on SQLAlchemy: replicated models, the write guard, coalescing and
synchronous flush."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select, text, update

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.sharding.guard import UnguardedWriteError, unguarded_write
from outbox_engine.store.status import ItemStatus

from ..replicated import THING_AUDIT, THING_UPDATE, Thing, things  # noqa: F401 - fixture
from ..support import (
    CALLS,
    FAILURES,
    OutboxItem,
    RecordingTransport,
    make_registry,
    running_worker,
    transport,
    wait_for,
)


async def items(container: Container) -> list[OutboxItem]:
    async with container.session_factory()() as session:
        return list((await session.execute(select(OutboxItem).order_by(OutboxItem.id))).scalars())


@pytest.mark.usefixtures("things")
async def test_orm_writes_of_a_replicated_model_emit_items_in_the_same_flush(
    container: Container,
) -> None:
    async with container.session_factory()() as session:
        async with session.begin():
            thing = Thing(account_id=42, name="first")
            session.add(thing)
        async with session.begin():
            thing.name = "second"
        async with session.begin():
            await session.delete(thing)
        async with session.begin():
            session.add(Thing(account_id=43, name="rolled back"))
            await session.flush()
            await session.rollback()
    emitted = await items(container)
    assert [(i.event_name, i.event_key, i.headers["operation"]) for i in emitted] == [
        ("thing_update", "42", "insert"),
        ("thing_update", "42", "update"),
        ("thing_update", "42", "delete"),
    ]
    payloads = [json.loads(i.payload) for i in emitted]
    assert payloads[0]["object"] == {"id": thing.id, "account_id": 42, "name": "first"}
    assert payloads[1]["object"]["name"] == "second"
    assert payloads[2]["object"] == {"deleted": True, "object_id": str(thing.id)}
    assert {i.headers["object-id"] for i in emitted} == {str(thing.id)}
    assert emitted[0].headers["category"] == THING_UPDATE.value


@pytest.mark.usefixtures("things")
async def test_the_guard_refuses_bulk_writes_with_the_sql_and_the_fix(container: Container) -> None:
    async with container.session_factory()() as session, session.begin():
        session.add(Thing(account_id=1, name="a"))

    async def bulk_update() -> None:
        async with container.session_factory()() as session, session.begin():
            await session.execute(update(Thing).values(name="b"))

    async def raw_delete() -> None:
        async with container.engine().begin() as conn:
            await conn.execute(text("DELETE FROM replicated_things WHERE account_id = 1"))

    with pytest.raises(UnguardedWriteError) as info:
        await bulk_update()
    assert "UPDATE replicated_things SET name=" in str(info.value)
    assert "unguarded_write" in str(info.value)
    with pytest.raises(UnguardedWriteError, match="DELETE FROM replicated_things"):
        await raw_delete()
    with unguarded_write():
        async with container.session_factory()() as session, session.begin():
            await session.execute(update(Thing).values(name="c"))
    async with container.session_factory()() as session:
        assert (await session.execute(select(Thing.name))).scalars().all() == ["c"]


async def _statuses(container: Container) -> list[int]:
    return [i.status for i in await items(container)]


@pytest.mark.usefixtures("things")
async def test_coalescing_delivers_the_newest_of_an_object_only_for_opted_in_categories(
    container: Container,
) -> None:
    outbox = container.outbox()
    registry = make_registry(
        outbox={"transports": [transport(RecordingTransport, name="c")], "retry_strategies": []}
    )
    async with container.session_factory()() as session, session.begin():
        for n in range(5):
            await outbox.create_for(
                session,
                OutboxItem,
                THING_UPDATE,
                payload={"n": n},
                shard_identifier=7,
                object_identifier=1,
            )
        for n in range(5):
            await outbox.create_for(
                session,
                OutboxItem,
                THING_AUDIT,
                payload={"n": n},
                shard_identifier=7,
                object_identifier=1,
            )
    async with running_worker(container, registry):
        await wait_for(lambda: _all_done(container), within=20)
    by_event: dict[str, list[int]] = {}
    for item in await items(container):
        by_event.setdefault(item.event_name, []).append(item.status)
    assert sorted(by_event["thing_update"]) == [ItemStatus.DELIVERED] + [ItemStatus.DISCARDED] * 4
    assert by_event["thing_audit"] == [ItemStatus.DELIVERED] * 5
    delivered_updates = [
        json.loads(p)["n"] for k, _, p in CALLS["c"] if json.loads(p)["n"] is not None
    ]
    assert delivered_updates.count(4) == 2  # the newest update, and the fifth audit item
    assert len(CALLS["c"]) == 6


async def _all_done(container: Container) -> bool:
    return all(s != ItemStatus.PENDING for s in await _statuses(container))


@pytest.mark.usefixtures("things")
async def test_a_synchronous_flush_reports_each_outcome_to_the_caller(container: Container) -> None:
    from outbox_engine.sharding.flush import Flusher

    registry = make_registry(
        outbox={
            "transports": [transport(RecordingTransport, name="f")],
            "retry_strategies": [],
            "max_retries": 3,
        }
    )
    flusher = Flusher(registry, container.resources(), container.middlewares())
    outbox = container.outbox()
    async with container.session_factory()() as session, flusher.context(session) as ctx:
        first = await outbox.create(
            session, OutboxItem, event_key="1", event_name="e", payload=b"ok"
        )
        async with flusher.context(session, flush=False):
            deferred = await outbox.create(
                session, OutboxItem, event_key="2", event_name="e", payload=b"later"
            )
    assert ctx.outcomes[first].status == "delivered"
    assert ctx.delivered
    assert deferred not in ctx.outcomes

    FAILURES["f"] = 1
    async with container.session_factory()() as session, flusher.context(session) as failing:
        broken = await outbox.create(
            session, OutboxItem, event_key="3", event_name="e", payload=b"x"
        )
    assert failing.outcomes[broken].status == "failed"
    assert failing.outcomes[broken].error == "RuntimeError: transport failed (test)"

    with pytest.raises(RuntimeError, match="business failure"):  # noqa: PT012 - the context is the subject
        async with container.session_factory()() as session, flusher.context(session) as aborted:
            await outbox.create(session, OutboxItem, event_key="4", event_name="e", payload=b"x")
            raise RuntimeError("business failure")
    assert aborted.outcomes == {}

    by_uuid = {i.uuid: (i.status, i.errors_count) for i in await items(container)}
    assert by_uuid == {
        first: (ItemStatus.DELIVERED, 0),
        deferred: (ItemStatus.PENDING, 0),  # left to the worker
        broken: (ItemStatus.PENDING, 1),  # its attempt recorded; the worker retries it
    }
    assert [p for _, _, p in CALLS["f"]] == [b"ok", b"x"]
