"""A poisoned head in a strict box (real PostgreSQL): `poisoned_head: park` moves it aside in
the worker's own record transaction, with an audit row, and its key moves on in order;
`block` keeps the key waiting."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.store.status import ItemStatus

from ..support import CALLS, make_registry, reset_transports, running_worker, wait_for
from .test_relay import create, recording, statuses


@pytest.fixture(autouse=True)
def _reset() -> None:
    reset_transports()


async def _status_count(container: Container, status: ItemStatus, expected: int) -> bool:
    rows = await statuses(container)
    return sum(1 for s, _, _ in rows.values() if s == status) == expected


async def _audit(container: Container) -> list[tuple[str, str, str | None, object, int, str]]:
    async with container.engine().connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT actor, action, box, selection, affected, detail FROM outbox_audit ORDER BY id"
            )
        )
        return [tuple(r) for r in rows]


async def test_park_moves_a_poisoned_head_aside_audited_and_its_key_moves_on(
    container: Container,
) -> None:
    async with container.engine().begin() as conn:
        await conn.execute(text("TRUNCATE outbox_audit"))
    registry = make_registry(outbox=recording(max_retries=0, poisoned_head="park"))
    await create(container, [("1", "e", "poison"), ("1", "e", b"a"), ("1", "e", b"b")])
    async with running_worker(container, registry):
        await wait_for(lambda: _status_count(container, ItemStatus.DELIVERED, 2), within=10)
    assert [p for _, _, p in CALLS["t"]] == [b"poison", b"a", b"b"]
    rows = await statuses(container)
    assert rows[1] == (ItemStatus.PARKED, 1, "PermanentFailure: poison payload")
    audit = await _audit(container)
    assert len(audit) == 1
    actor, action, box, selection, affected, detail = audit[0]
    assert actor.startswith("worker:")
    assert (action, box, affected) == ("park", registry.names()[0], 1)
    assert (json.loads(selection) if isinstance(selection, str) else selection) == {"ids": [1]}
    assert "poisoned_head: park" in detail


async def test_block_keeps_the_key_waiting_behind_its_poisoned_head(container: Container) -> None:
    registry = make_registry(outbox=recording(max_retries=0))
    assert registry.get(registry.names()[0]).config.poisoned_head == "block"
    await create(container, [("1", "e", "poison"), ("1", "e", b"a"), ("2", "e", b"other")])
    async with running_worker(container, registry):
        await wait_for(lambda: _status_count(container, ItemStatus.FAILED, 1), within=10)
        await wait_for(lambda: _status_count(container, ItemStatus.DELIVERED, 1), within=10)
        await wait_for(lambda: _status_count(container, ItemStatus.PENDING, 1), within=10)
    assert sorted(p for _, _, p in CALLS["t"]) == [b"other", b"poison"]
