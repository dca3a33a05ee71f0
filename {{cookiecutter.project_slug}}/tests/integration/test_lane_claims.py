"""When a lane claims again at once (relay/lanes.py, `BatchReport.more`): only when its last
claim may have left claimable items behind. A batch that took everything is followed by no
claim until a NOTIFY or the idle probe says there is work; a full batch, a bucket at its
share of the claim, or items deferred behind a failure are claimed again right away."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.config.registry import BoxRegistry
from outbox_engine.relay.claim import bucket_share

from ..support import (
    CALLS,
    FAILURES,
    OUTBOX_BOX,
    Claims,
    OutboxItem,
    RecordingTransport,
    lane_keys,
    lanes_idle,
    make_registry,
    reset_transports,
    running_worker,
    transport,
    wait_for,
)

LANES = 2
# Longer than any wait here: a delivery within it came from a claim made at once, not from
# an idle lane woken by the probe.
POLL = 5.0


@pytest.fixture(autouse=True)
def _reset() -> None:
    reset_transports()


def _registry(**box: Any) -> BoxRegistry:
    return make_registry(
        outbox={"transports": [transport(RecordingTransport, name="t")], "poll_interval": POLL}
        | box
    )


def _lane_keys(registry: BoxRegistry, lane: int, count: int) -> list[str]:
    return lane_keys(registry, lane, count, LANES)


async def _create(container: Container, keys: list[str]) -> None:
    """One item per entry of `keys`, in this order, in one transaction (one NOTIFY)."""
    async with container.session_factory()() as session, session.begin():
        await container.outbox().create_batch(
            session,
            OutboxItem,
            [
                {"event_key": key, "event_name": "e", "payload": f"{key}:{n}".encode()}
                for n, key in enumerate(keys)
            ],
        )


async def _idle(worker: Any) -> None:
    await lanes_idle(worker, LANES)


def _delivered(count: int) -> Any:
    async def check() -> bool:
        return len(CALLS["t"]) >= count

    return check


async def test_a_batch_that_took_everything_is_not_followed_by_a_claim(
    container: Container,
) -> None:
    registry = _registry()
    (key,) = _lane_keys(registry, 0, 1)
    async with running_worker(container, registry, concurrency=LANES) as worker:
        claims = Claims(worker)
        await _idle(worker)
        claims.count = 0
        for round_ in range(3):
            await _create(container, [key])
            await wait_for(_delivered(round_ + 1), within=3)
            await _idle(worker)
        await asyncio.sleep(0.5)
        # One claim per commit: the NOTIFY's lane took the item and went back to waiting
        # (it used to claim again at once and find nothing: 6 claims).
        assert claims.count == 3
        assert [p for _, _, p in CALLS["t"]] == [f"{key}:0".encode()] * 3


async def test_a_bucket_at_its_share_of_the_claim_is_claimed_again_at_once(
    container: Container,
) -> None:
    registry = _registry(batch_size=50)
    (key,) = _lane_keys(registry, 0, 1)
    buckets = registry.get(OUTBOX_BOX).config.bucket_count
    share = bucket_share(50, len(range(0, buckets, LANES)))
    assert share < 50  # the share stops the claim, not the batch size
    async with running_worker(container, registry, concurrency=LANES) as worker:
        claims = Claims(worker)
        await _idle(worker)
        claims.count = 0
        await _create(container, [key] * (share + 5))
        # All of them long before the idle probe (POLL) could have woken the lane.
        await wait_for(_delivered(share + 5), within=3)
        await _idle(worker)
        await asyncio.sleep(0.3)
        assert claims.count == 2  # the share, then the 5 left behind it
        ids = [item_id for _, item_id, _ in CALLS["t"]]
        assert ids == sorted(ids)
        assert len(set(ids)) == share + 5


async def test_a_full_batch_is_claimed_again_at_once(container: Container) -> None:
    registry = _registry(batch_size=8)
    keys = _lane_keys(registry, 0, 12)  # one item each: no bucket reaches its share of 8
    async with running_worker(container, registry, concurrency=LANES) as worker:
        claims = Claims(worker)
        await _idle(worker)
        claims.count = 0
        await _create(container, keys)
        await wait_for(_delivered(12), within=3)
        await _idle(worker)
        await asyncio.sleep(0.3)
        assert claims.count == 2  # 8 (the batch size), then 4
        assert sorted(p for _, _, p in CALLS["t"]) == sorted(
            f"{k}:{n}".encode() for n, k in enumerate(keys)
        )


async def test_items_deferred_behind_a_failure_are_claimed_again_at_once(
    container: Container,
) -> None:
    # A strict box: the key's first item fails and goes into a long backoff; the two behind
    # it in the same batch are not attempted (deferred). They are claimable again at once as
    # far as the lane knows, so it claims again; the key is held back now, and it finds none.
    registry = _registry(
        strict_order=True,
        backoff={"min_seconds": 60, "max_seconds": 60, "multiplier": 1, "jitter": 0},
    )
    (key,) = _lane_keys(registry, 0, 1)
    async with running_worker(container, registry, concurrency=LANES) as worker:
        claims = Claims(worker)
        await _idle(worker)
        claims.count = 0
        FAILURES["t"] = 1
        await _create(container, [key] * 3)
        await wait_for(_delivered(1), within=3)
        await _idle(worker)
        await asyncio.sleep(0.3)
        assert claims.count == 2
        assert [p for _, _, p in CALLS["t"]] == [f"{key}:0".encode()]  # 2 and 3 deferred
