"""The idle probe (relay/idle_probe.py): idle lanes make no claims of their own; one
statement per poll finds the work no NOTIFY announces, skips what is paused, and when it
fails every lane claims for itself."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.relay.worker import Worker
from outbox_engine.store.pauses import add_pause, remove_pause

from ..support import (
    CALLS,
    OUTBOX_BOX,
    Claims,
    RecordingTransport,
    create_due_in,
    lanes_idle,
    make_registry,
    reset_transports,
    running_worker,
    transport,
    wait_for,
)

POLL = 0.3
LANES = 2


@pytest.fixture(autouse=True)
def _reset() -> None:
    reset_transports()


def _registry() -> Any:
    return make_registry(
        outbox={
            "transports": [transport(RecordingTransport, name="t")],
            "retry_strategies": [],
            "poll_interval": POLL,
        }
    )


async def _idle(worker: Worker) -> None:
    """Wait until every lane of the box waits idle."""
    await lanes_idle(worker, LANES)


def _delivered(name: str, count: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return len(CALLS[name]) >= count

    return check


async def test_idle_lanes_claim_nothing_and_one_probe_a_poll_finds_an_item_whose_wait_ended(
    container: Container,
) -> None:
    async with running_worker(container, _registry(), concurrency=LANES) as worker:
        claims = Claims(worker)
        await _idle(worker)
        before = worker.probe.statements
        claims.count = 0
        await asyncio.sleep(10 * POLL)
        # Idle: no claim at all, one probe per poll for both lanes together.
        assert claims.count == 0
        assert 5 <= worker.probe.statements - before <= 12, worker.probe.statements - before
        assert worker.probe.woken == 0

        await create_due_in(container, 4 * POLL, b"later")
        await asyncio.sleep(2 * POLL)
        assert CALLS["t"] == []  # not due yet: the probe did not wake its lane
        assert worker.probe.woken == 0
        await wait_for(_delivered("t", 1), within=5)
        assert [p for _, _, p in CALLS["t"]] == [b"later"]
        assert worker.probe.woken == 1  # only the lane of the item's bucket


async def test_a_paused_box_is_not_probed_and_its_items_go_after_the_resume(
    container: Container,
) -> None:
    engine = container.engine()
    async with running_worker(container, _registry(), concurrency=LANES) as worker:
        await add_pause(engine, OUTBOX_BOX)
        await worker.probe.pauses.refresh()
        claims = Claims(worker)
        await _idle(worker)
        await create_due_in(container, 0, b"held")
        await asyncio.sleep(6 * POLL)
        assert claims.count == 0
        assert worker.probe.woken == 0
        assert CALLS["t"] == []
        await remove_pause(engine, OUTBOX_BOX)
        await wait_for(_delivered("t", 1), within=10)
        assert [p for _, _, p in CALLS["t"]] == [b"held"]


class _Broken:
    """Connections whose every acquisition fails as an unreachable server would."""

    def acquire(self) -> Any:
        raise OSError("connection refused (test)")

    async def close(self) -> None:
        return None


async def test_when_the_probe_fails_every_idle_lane_claims_for_itself(
    container: Container,
) -> None:
    async with running_worker(container, _registry(), concurrency=LANES) as worker:
        worker.probe.connections = _Broken()  # type: ignore[assignment]
        claims = Claims(worker)
        await _idle(worker)
        claims.count = 0
        await asyncio.sleep(5 * POLL)
        # Each failed probe wakes both lanes: they claim about once a poll each.
        assert claims.count >= 2 * 3, claims.count
        assert worker.probe.statements >= 3
        await create_due_in(container, 2 * POLL, b"anyway")
        await wait_for(_delivered("t", 1), within=5)
        assert [p for _, _, p in CALLS["t"]] == [b"anyway"]
