"""The lanes of a box as a group (relay/lane_group.py), on a real worker with
`join_lanes`: at a steady rate lane 0 claims for both lanes (one claim a transaction, where
lanes apart, the default, make one per lane), a backlog splits them and they claim apart until both took everything, and the idle
probe of a joined lane 0 finds work in every lane's buckets. Items of a key go in order
through every split and join."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.config.registry import BoxRegistry
from outbox_engine.relay.lane_group import LaneGroup
from outbox_engine.relay.worker import Worker

from ..support import (
    CALLS,
    OUTBOX_BOX,
    Claims,
    OutboxItem,
    RecordingTransport,
    create_due_in,
    lane_keys,
    lanes_idle,
    make_registry,
    reset_transports,
    running_worker,
    transport,
    wait_for,
)

LANES = 2


@pytest.fixture(autouse=True)
def _reset() -> None:
    reset_transports()


def _registry(**box: Any) -> BoxRegistry:
    return make_registry(
        outbox={"transports": [transport(RecordingTransport, name="t")], "poll_interval": 5.0} | box
    )


def _group(worker: Worker, registry: BoxRegistry) -> LaneGroup:
    return worker.groups[registry.get(OUTBOX_BOX).channel]


async def _joined_and_idle(worker: Worker, group: LaneGroup) -> None:
    """Wait until the group is joined and lane 0 waits for work (a lane that went idle
    while the group was split may still wait in the probe, for no buckets)."""

    async def check() -> bool:
        return not group.split and 0 in worker.probe.idle_lanes(OUTBOX_BOX)

    await wait_for(check, within=10)


def _lanes(claims: Claims) -> list[set[int]]:
    """Each claim's lanes (the bucket parities it covered)."""
    return [{b % LANES for b in buckets} for buckets in claims.buckets]


async def _create(container: Container, items: list[tuple[str, str]]) -> None:
    """One item per (key, payload), in this order, in one transaction (one NOTIFY)."""
    async with container.session_factory()() as session, session.begin():
        await container.outbox().create_batch(
            session,
            OutboxItem,
            [{"event_key": k, "event_name": "e", "payload": p.encode()} for k, p in items],
        )


def _delivered(count: int) -> Any:
    async def check() -> bool:
        return len(CALLS["t"]) >= count

    return check


@pytest.mark.parametrize(("join", "claims_per_commit"), [(True, 1), (False, 2)])
async def test_at_a_steady_rate_the_joined_lanes_make_one_claim_a_transaction(
    container: Container, join: bool, claims_per_commit: int
) -> None:
    registry = _registry()
    (even,) = lane_keys(registry, 0, 1, LANES)
    (odd,) = lane_keys(registry, 1, 1, LANES)
    async with running_worker(container, registry, concurrency=LANES, join_lanes=join) as worker:
        group = _group(worker, registry)
        claims = Claims(worker)
        await lanes_idle(worker, 1 if join else LANES)
        claims.buckets.clear()
        for n in range(10):
            await _create(container, [(even, f"e{n}"), (odd, f"o{n}")])
            await wait_for(_delivered(2 * n + 2), within=5)
            await lanes_idle(worker, 1 if join else LANES)
        await asyncio.sleep(0.3)
        assert len(claims.buckets) == 10 * claims_per_commit
        if not join:
            assert group.split
            assert _lanes(claims).count({0}) == _lanes(claims).count({1}) == 10
        else:
            # Lane 0 claimed both lanes' buckets every time; the group never split.
            assert _lanes(claims) == [{0, 1}] * 10
            assert group.splits == 0
            assert not group.split
        payloads = [p.decode() for _, _, p in CALLS["t"]]
        assert sorted(payloads) == sorted(
            [f"e{n}" for n in range(10)] + [f"o{n}" for n in range(10)]
        )


async def test_a_backlog_splits_the_lanes_and_they_join_again_once_it_is_gone(
    container: Container, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="outbox_engine.relay.worker")
    registry = _registry(batch_size=8)
    keys = lane_keys(registry, 0, 3, LANES) + lane_keys(registry, 1, 3, LANES)
    async with running_worker(container, registry, concurrency=LANES, join_lanes=True) as worker:
        group = _group(worker, registry)
        claims = Claims(worker)
        await lanes_idle(worker, 1)
        claims.buckets.clear()
        # 60 items of 6 keys (10 each, interleaved) in one transaction: a claim of 8 leaves
        # more behind.
        items = [(keys[n % 6], f"{keys[n % 6]}:{n // 6}") for n in range(60)]
        await _create(container, items)
        await wait_for(_delivered(60), within=10)
        await _joined_and_idle(worker, group)
        assert group.splits == 1
        assert group.joins == 1
        assert not group.split
        lanes = _lanes(claims)
        assert lanes[0] == {0, 1}  # the joined claim that found the backlog
        assert {0} in lanes
        assert {1} in lanes
        assert sum(len(b) > 0 for b in claims.buckets) == len(lanes)
        # Each key's items in the order they were created, through the split and the join.
        for key in keys:
            sent = [p.decode() for _, _, p in CALLS["t"] if p.decode().startswith(f"{key}:")]
            assert sent == [f"{key}:{i}" for i in range(10)], key

        # A steady trickle afterwards is claimed joined again.
        claims.buckets.clear()
        await _create(container, [(keys[0], "after:0"), (keys[5], "after:1")])
        await wait_for(_delivered(62), within=5)
        await _joined_and_idle(worker, group)
        await asyncio.sleep(0.3)
        assert _lanes(claims) == [{0, 1}]
    # The worker says at its stop how often the lanes split and joined (for operators).
    said = [r.getMessage() for r in caplog.records if "lanes split" in r.getMessage()]
    assert f"box {OUTBOX_BOX}: lanes split 1 times and joined again 1 times" in said


async def test_the_probe_of_a_joined_lane_0_finds_work_in_the_other_lanes_buckets(
    container: Container,
) -> None:
    registry = make_registry(
        outbox={
            "transports": [transport(RecordingTransport, name="t")],
            "retry_strategies": [],
            "poll_interval": 0.3,
        }
    )
    (odd,) = lane_keys(registry, 1, 1, LANES)
    async with running_worker(container, registry, concurrency=LANES, join_lanes=True) as worker:
        await lanes_idle(worker, 1)
        assert worker.probe.idle_lanes(OUTBOX_BOX) == [0]
        # An item of a lane-1 bucket that becomes due 1.2 s after its commit: its NOTIFY
        # finds nothing due, and only the probe can announce it.
        await create_due_in(container, 1.2, b"later", key=odd)
        woken = worker.probe.woken
        await asyncio.sleep(0.6)
        assert CALLS["t"] == []
        await wait_for(_delivered(1), within=5)
        assert [p for _, _, p in CALLS["t"]] == [b"later"]
        assert worker.probe.woken == woken + 1  # lane 0, for a bucket of lane 1
