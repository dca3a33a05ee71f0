"""Inbox processing: handlers commit with their item, roll back alone, retry, fail, and
can be retried by an operator."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import func, insert, select, update

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.store.status import ItemStatus

from ..support import (
    CALLS,
    FAILURES,
    INBOX_BOX,
    InboxItem,
    OutboxItem,
    RecordingHandler,
    make_registry,
    reset_transports,
    running_worker,
    transport,
    wait_for,
)

FAST = {"min_seconds": 0.1, "max_seconds": 0.1, "multiplier": 1, "jitter": 0}


@pytest.fixture(autouse=True)
def _reset() -> None:
    reset_transports()


async def receive(container: Container, messages: list[tuple[str, bytes]]) -> None:
    """Store inbox items as the consumer would."""
    box = make_registry().get(INBOX_BOX)
    rows = [
        {
            "uuid": uuid.uuid4(),
            "event_name": "thing",
            "event_key": key,
            "bucket": box.bucket_for(key),
            "payload": payload,
            "headers": {},
        }
        for key, payload in messages
    ]
    async with container.engine().begin() as conn:
        await conn.execute(insert(InboxItem), rows)


async def inbox_state(container: Container) -> dict[str, tuple[int, int]]:
    async with container.session_factory()() as session:
        rows = await session.execute(
            select(InboxItem.event_key, InboxItem.status, InboxItem.errors_count)
        )
        return {r.event_key: (r.status, r.errors_count) for r in rows}


async def outbox_count(container: Container) -> int:
    async with container.session_factory()() as session:
        return int(
            (await session.execute(select(func.count()).select_from(OutboxItem))).scalar_one()
        )


async def _settled(container: Container, expected: dict[str, int]) -> bool:
    return {k: v[0] for k, v in (await inbox_state(container)).items()} == expected


async def test_a_failing_handler_rolls_back_its_own_writes_only_and_is_retried(
    container: Container,
) -> None:
    registry = make_registry(
        inbox={
            "transports": [transport(RecordingHandler, name="h")],
            "backoff": FAST,
            "max_retries": 5,
        }
    )
    FAILURES["h"] = 2
    await receive(container, [("a", b"ok"), ("b", b"fail"), ("c", b"ok")])
    async with running_worker(container, registry, boxes=[INBOX_BOX]):
        await wait_for(lambda: _settled(container, {"a": 2, "b": 2, "c": 2}), within=20)
    assert await inbox_state(container) == {"a": (2, 0), "b": (2, 2), "c": (2, 0)}
    assert len(CALLS["h"]) == 5  # b ran three times
    assert await outbox_count(container) == 3  # the two failed attempts left no outbox item


async def test_after_max_retries_the_item_fails_and_an_operator_can_retry_it(
    container: Container,
) -> None:
    registry = make_registry(
        inbox={
            "transports": [transport(RecordingHandler, name="h")],
            "backoff": FAST,
            "max_retries": 1,
        }
    )
    FAILURES["h"] = 100
    await receive(container, [("a", b"fail")])
    async with running_worker(container, registry, boxes=[INBOX_BOX]):
        await wait_for(lambda: _settled(container, {"a": 1}), within=20)
        assert await inbox_state(container) == {"a": (1, 2)}
        assert await outbox_count(container) == 0
        FAILURES["h"] = 0
        async with container.session_factory()() as session, session.begin():
            await session.execute(
                update(InboxItem).values(
                    status=int(ItemStatus.PENDING), errors_count=0, next_attempt_at=None
                )
            )
        await wait_for(lambda: _settled(container, {"a": 2}), within=20)
    assert await outbox_count(container) == 1
