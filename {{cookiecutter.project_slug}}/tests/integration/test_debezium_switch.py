"""The switch from Debezium to the worker when Debezium is slow (real PostgreSQL, a real
logical slot that no connector reads, so its confirmed position moves only when the test
moves it): the switch times out with the box paused and its new items PENDING, and running
it again waits again and lifts the pause once the slot is through; nothing is resumed early."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text

from outbox_engine.debezium.register import ensure_publication_and_slot
from outbox_engine.debezium.switch import (
    SWITCH_PAUSE_REASON,
    SwitchRefused,
    switch_to_debezium,
    switch_to_worker,
)
from outbox_engine.store import slots
from outbox_engine.store.pauses import list_pauses
from outbox_engine.store.status import ItemStatus

from ..debezium_ops_support import Relays, captured_ids, create, relays, trigger_topic
from ..ops_support import TABLE

__all__ = ["relays"]  # the fixture
# Slots and the capture trigger need PostgreSQL with wal_level=logical (marker connect).
pytestmark = pytest.mark.connect


async def _advance(relays: Relays) -> None:
    """Do what Debezium would: confirm everything written so far."""
    async with relays.container.engine().connect() as conn:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.execute(
            text("SELECT pg_replication_slot_advance(:slot, pg_current_wal_lsn())"),
            {"slot": relays.names.slot},
        )


@contextlib.asynccontextmanager
async def _confirming(relays: Relays) -> AsyncIterator[None]:
    """Confirm, as a connector that keeps up would, every 0.2 s while the block runs."""

    async def loop() -> None:
        while True:
            await _advance(relays)
            await asyncio.sleep(0.2)

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _statuses(relays: Relays, ids: list[int]) -> list[int]:
    async with relays.container.engine().connect() as conn:
        rows = await conn.execute(
            text(f"SELECT status FROM {TABLE} WHERE id = ANY(:ids) ORDER BY id"),
            {"ids": ids},
        )
        return [int(r[0]) for r in rows]


async def test_a_timed_out_switch_to_the_worker_completes_when_run_again(
    relays: Relays,
) -> None:
    engine = relays.container.engine()
    box = relays.box
    await ensure_publication_and_slot(engine, relays.names)
    before = await create(relays.container, "ab")
    handed = await switch_to_debezium(engine, box, relays.names)
    assert handed.copied == 2
    captured = await create(relays.container, "abc")
    assert await captured_ids(relays.container) == before + captured
    assert await _statuses(relays, before + captured) == [ItemStatus.DELIVERED] * 5

    with pytest.raises(SwitchRefused, match="stays paused") as refused:
        await switch_to_worker(engine, box, relays.names, timeout_s=1.0)
    assert "run the switch again" in str(refused.value)
    assert await trigger_topic(relays.container) is None
    pauses = await list_pauses(engine, box.name)
    assert [(p.bucket, p.event_key, p.reason) for p in pauses] == [
        (None, None, SWITCH_PAUSE_REASON)
    ]
    waiting = await create(relays.container, "ac")
    assert await _statuses(relays, waiting) == [ItemStatus.PENDING] * 2

    # Still not confirmed: the second run times out too and leaves the pause.
    with pytest.raises(SwitchRefused):
        await switch_to_worker(engine, box, relays.names, timeout_s=1.0)
    assert len(await list_pauses(engine, box.name)) == 1

    async with _confirming(relays):
        report = await switch_to_worker(engine, box, relays.names, timeout_s=30.0)
    assert report.was_captured is False
    assert await list_pauses(engine, box.name) == []
    async with engine.connect() as conn:
        state = await slots.slot_state(conn, relays.names.slot)
    assert report.lsn is not None
    assert state.confirmed_flush_lsn is not None
    # The items created while paused are the worker's now, untouched and in the table.
    assert await _statuses(relays, waiting) == [ItemStatus.PENDING] * 2
    assert await captured_ids(relays.container) == before + captured


async def test_an_operators_own_pause_is_left_alone(relays: Relays) -> None:
    """A pause the operator set before the switch is not the switch's to lift."""
    from outbox_engine.store.pauses import add_pause

    engine = relays.container.engine()
    box = relays.box
    await ensure_publication_and_slot(engine, relays.names)
    await switch_to_debezium(engine, box, relays.names)
    await add_pause(engine, box.name, reason="maintenance")
    async with _confirming(relays):
        report = await switch_to_worker(engine, box, relays.names, timeout_s=30.0)
    assert report.was_captured is True
    assert [p.reason for p in await list_pauses(engine, box.name)] == ["maintenance"]


async def test_the_switch_to_debezium_is_refused_while_anything_of_the_box_is_paused(
    relays: Relays,
) -> None:
    from outbox_engine.store.pauses import add_pause, remove_pause

    engine = relays.container.engine()
    box = relays.box
    await ensure_publication_and_slot(engine, relays.names)
    pending = await create(relays.container, "ab")
    await add_pause(engine, box.name, event_key="a", reason="investigating")
    with pytest.raises(SwitchRefused, match=f"key 'a' of box {box.name} paused"):
        await switch_to_debezium(engine, box, relays.names)
    # Nothing changed: no trigger, nothing captured, the items still the worker's.
    assert await trigger_topic(relays.container) is None
    assert await captured_ids(relays.container) == []
    assert await _statuses(relays, pending) == [ItemStatus.PENDING] * 2
    await remove_pause(engine, box.name, event_key="a")
    assert (await switch_to_debezium(engine, box, relays.names)).copied == 2
