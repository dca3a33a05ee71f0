from __future__ import annotations

import asyncio
import time
import uuid

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy import func, select

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.creation.chain import handling

from ..support import OutboxItem


async def count_items(container: Container) -> int:
    async with container.session_factory()() as session:
        return int(
            (await session.execute(select(func.count()).select_from(OutboxItem))).scalar_one()
        )


async def test_a_rolled_back_transaction_leaves_no_item(container: Container) -> None:
    outbox = container.outbox()
    async with container.session_factory()() as session, session.begin():
        await outbox.create(session, OutboxItem, event_key="1", event_name="e", payload={"a": 1})
        await session.rollback()
    assert await count_items(container) == 0


async def test_an_exception_in_the_business_transaction_leaves_no_item(
    container: Container,
) -> None:
    outbox = container.outbox()

    async def business_transaction() -> None:
        async with container.session_factory()() as session, session.begin():
            await outbox.create(session, OutboxItem, event_key="1", event_name="e", payload=b"x")
            raise RuntimeError("business rule violated")

    with pytest.raises(RuntimeError, match="business rule violated"):
        await business_transaction()
    assert await count_items(container) == 0


async def test_a_committed_item_has_its_bucket_chain_and_payload(container: Container) -> None:
    outbox = container.outbox()
    box = container.registry().for_item_class(OutboxItem)
    async with container.session_factory()() as session, session.begin():
        message_id = await outbox.create(
            session,
            OutboxItem,
            event_key=4242,
            event_name="thing_created",
            payload={"id": 4242, "when": uuid.UUID(int=1)},
            headers={"tenant": "acme"},
        )
    async with container.session_factory()() as session:
        item = (await session.execute(select(OutboxItem))).scalar_one()
    assert item.uuid == message_id
    assert item.event_key == "4242"
    assert item.bucket == box.bucket_for("4242")
    assert item.status == 0
    assert item.payload == b'{"id":4242,"when":"00000000-0000-0000-0000-000000000001"}'
    assert item.headers["tenant"] == "acme"
    assert item.headers["correlation-id"] == str(message_id)
    assert item.headers["hop"] == 0
    assert "causation-id" not in item.headers


async def test_items_created_while_handling_a_message_continue_its_chain(
    container: Container,
) -> None:
    outbox = container.outbox()
    with handling(correlation_id="corr-1", message_id="parent-1", hop=3):
        async with container.session_factory()() as session, session.begin():
            await outbox.create(session, OutboxItem, event_key="7", event_name="e", payload=b"x")
    async with container.session_factory()() as session:
        item = (await session.execute(select(OutboxItem))).scalar_one()
    assert item.headers["correlation-id"] == "corr-1"
    assert item.headers["causation-id"] == "parent-1"
    assert item.headers["hop"] == 4


async def test_create_batch_inserts_every_item_in_one_go(container: Container) -> None:
    outbox = container.outbox()
    specs = [{"event_key": str(i % 10), "event_name": "e", "payload": {"n": i}} for i in range(250)]
    async with container.session_factory()() as session, session.begin():
        ids = await outbox.create_batch(session, OutboxItem, specs)
    assert len(set(ids)) == 250
    assert await count_items(container) == 250
    with pytest.raises(TypeError, match="create_batch item 0: missing 'event_name'"):
        async with container.session_factory()() as session, session.begin():
            await outbox.create_batch(session, OutboxItem, [{"event_key": "1", "payload": b""}])


async def test_items_get_time_ordered_message_ids_unless_the_caller_gives_one(
    container: Container,
) -> None:
    outbox = container.outbox()
    given = uuid.uuid4()
    specs = [{"event_key": str(i % 7), "event_name": "e", "payload": {"n": i}} for i in range(100)]
    before = time.time_ns() // 1_000_000
    async with container.session_factory()() as session, session.begin():
        batch = await outbox.create_batch(session, OutboxItem, specs)
    await asyncio.sleep(0.003)
    async with container.session_factory()() as session, session.begin():
        single = await outbox.create(
            session, OutboxItem, event_key="1", event_name="e", payload=b""
        )
        mine = await outbox.create(
            session, OutboxItem, event_key="1", event_name="e", payload=b"", message_id=given
        )
    after = time.time_ns() // 1_000_000
    made = [*batch, single]
    assert {u.version for u in made} == {7}
    assert all(before <= u.int >> 80 <= after for u in made)
    assert max(batch) < single  # a later millisecond sorts after
    assert mine == given
    async with container.session_factory()() as session:
        stored = (await session.execute(select(OutboxItem.uuid).order_by(OutboxItem.id))).all()
    assert [row[0] for row in stored] == [*made, given]


async def test_reserved_headers_and_bad_keys_are_refused(container: Container) -> None:
    outbox = container.outbox()
    async with container.session_factory()() as session, session.begin():
        with pytest.raises(ValueError, match="set by the engine"):
            await outbox.create(
                session,
                OutboxItem,
                event_key="1",
                event_name="e",
                payload=b"",
                headers={"hop": "9"},
            )
        with pytest.raises(ValueError, match="event_key must be 1-255 characters"):
            await outbox.create(session, OutboxItem, event_key="", event_name="e", payload=b"")


async def test_workers_are_notified_at_commit_and_not_before(container: Container) -> None:
    outbox = container.outbox()
    box = container.registry().for_item_class(OutboxItem)
    listener = await asyncpg.connect(container.settings().asyncpg_dsn)
    notified: asyncio.Queue[str] = asyncio.Queue()
    await listener.add_listener(box.channel, lambda *args: notified.put_nowait(args[2]))
    try:
        async with container.session_factory()() as session, session.begin():
            await outbox.create(session, OutboxItem, event_key="1", event_name="e", payload=b"")
            await asyncio.sleep(0.2)
            assert notified.qsize() == 0
        assert await asyncio.wait_for(notified.get(), 5) == box.channel
    finally:
        await listener.close()
