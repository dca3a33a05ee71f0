"""The relay on real PostgreSQL and Kafka: delivery, order, retries, strategies, limits."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, text, update

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.config.registry import Box
from outbox_engine.creation.chain import handling
from outbox_engine.middleware import BatchNext, ItemNext, Middlewares
from outbox_engine.relay.processor import BoxProcessor
from outbox_engine.relay.worker import Worker
from outbox_engine.store.retention import purge
from outbox_engine.store.status import ItemStatus
from outbox_engine.transports.base import ItemRecord

from ..support import (
    CALLS,
    FAILURES,
    OUTBOX_BOX,
    OutboxItem,
    RecordingTransport,
    make_registry,
    order_violations,
    read_topic,
    reset_transports,
    running_worker,
    transport,
    wait_for,
)

FAST_BACKOFF = {"min_seconds": 0.1, "max_seconds": 0.2, "multiplier": 1, "jitter": 0}


@pytest.fixture(autouse=True)
def _reset() -> None:
    reset_transports()


async def create(container: Container, specs: Sequence[tuple[str, str, object]]) -> None:
    """Create (key, event, payload) items in one transaction."""
    async with container.session_factory()() as session, session.begin():
        await container.outbox().create_batch(
            session,
            OutboxItem,
            [{"event_key": k, "event_name": e, "payload": p} for k, e, p in specs],
        )


async def statuses(container: Container) -> dict[int, tuple[int, int, str | None]]:
    """id -> (status, errors_count, last_error)."""
    async with container.session_factory()() as session:
        rows = await session.execute(
            select(OutboxItem.id, OutboxItem.status, OutboxItem.errors_count, OutboxItem.last_error)
        )
        return {r.id: (r.status, r.errors_count, r.last_error) for r in rows}


async def count_status(container: Container, status: ItemStatus) -> int:
    async with container.session_factory()() as session:
        query = select(func.count()).select_from(OutboxItem).where(OutboxItem.status == int(status))
        return int((await session.execute(query)).scalar_one())


def recording(name: str = "t", **box: object) -> dict[str, object]:
    return {"transports": [transport(RecordingTransport, name=name)], "retry_strategies": [], **box}


async def test_relay_delivers_every_item_to_kafka_in_key_order(
    container: Container, env_topics: str
) -> None:
    registry = make_registry()
    keys = 20
    specs = [(str(n % keys), "thing_updated", {"seq": n}) for n in range(2000)]
    for start in range(0, len(specs), 500):
        await create(container, specs[start : start + 500])
    async with running_worker(container, registry, concurrency=2):
        await wait_for(lambda: _all_delivered(container, 2000), within=60)
    received = read_topic(container.settings().kafka_bootstrap_servers, env_topics, expect=2000)
    assert len({m.headers["message-id"] for m in received}) == 2000
    per_key: dict[str, list[int]] = defaultdict(list)
    for message in received:
        per_key[message.key].append(json.loads(message.value)["seq"])
    assert len(per_key) == keys
    assert order_violations(per_key) == 0
    first = received[0]
    assert first.headers["event-name"] == "thing_updated"
    assert first.headers["hop"] == "0"
    assert first.headers["correlation-id"] == first.headers["message-id"]
    assert "created-at" in first.headers


async def _all_delivered(container: Container, total: int) -> bool:
    return await count_status(container, ItemStatus.DELIVERED) == total


async def test_failed_attempts_back_off_and_then_succeed(container: Container) -> None:
    registry = make_registry(
        outbox=recording(retry_strategies=["exponential_backoff"], backoff=FAST_BACKOFF)
    )
    FAILURES["t"] = 2
    await create(container, [("1", "e", {"n": 1})])
    async with running_worker(container, registry):
        await wait_for(lambda: _all_delivered(container, 1), within=10)
    [(status, errors, last_error)] = (await statuses(container)).values()
    assert (status, errors) == (ItemStatus.DELIVERED, 2)
    assert last_error == "RuntimeError: transport failed (test)"
    assert len(CALLS["t"]) == 3


async def test_a_transport_returning_false_is_a_failed_attempt(container: Container) -> None:
    registry = make_registry(
        outbox={
            "transports": [transport(RecordingTransport, name="f", mode="false")],
            "max_retries": 0,
        }
    )
    FAILURES["f"] = 1
    await create(container, [("1", "e", b"x")])
    async with running_worker(container, registry):
        await wait_for(lambda: _count_failed(container, 1), within=10)
    [(status, errors, last_error)] = (await statuses(container)).values()
    assert (status, errors, last_error) == (
        ItemStatus.FAILED,
        1,
        "TransportFailed: transport returned False",
    )


async def _count_failed(container: Container, expected: int) -> bool:
    return await count_status(container, ItemStatus.FAILED) == expected


async def test_max_retries_then_failed(container: Container) -> None:
    registry = make_registry(outbox=recording(max_retries=2, poll_interval=0.05))
    FAILURES["t"] = 100
    await create(container, [("1", "e", b"x"), ("2", "e", b"y")])
    async with running_worker(container, registry):
        await wait_for(lambda: _count_failed(container, 2), within=10)
    assert {(s, e) for s, e, _ in (await statuses(container)).values()} == {(ItemStatus.FAILED, 3)}
    assert len(CALLS["t"]) == 6


async def test_an_unavailable_destination_consumes_no_retry(container: Container) -> None:
    registry = make_registry(
        outbox={
            "transports": [transport(RecordingTransport, name="u", mode="unavailable")],
            "max_retries": 0,
        }
    )
    FAILURES["u"] = 3
    await create(container, [("1", "e", b"x")])
    async with running_worker(container, registry):
        await wait_for(lambda: _all_delivered(container, 1), within=20)
    [(status, errors, _)] = (await statuses(container)).values()
    assert (status, errors) == (ItemStatus.DELIVERED, 0)
    assert len(CALLS["u"]) == 4


async def test_a_poison_payload_fails_at_once_and_the_rest_flows(container: Container) -> None:
    registry = make_registry(outbox=recording(max_retries=5))
    await create(container, [("1", "e", "poison"), ("2", "e", b"ok"), ("3", "e", b"ok")])
    async with running_worker(container, registry):
        await wait_for(lambda: _all_delivered(container, 2), within=10)
        await wait_for(lambda: _count_failed(container, 1), within=10)
    failed = [v for v in (await statuses(container)).values() if v[0] == ItemStatus.FAILED]
    assert failed == [(ItemStatus.FAILED, 1, "PermanentFailure: poison payload")]


async def test_latest_available_discards_a_retry_superseded_by_a_newer_delivery(
    container: Container,
) -> None:
    registry = make_registry(
        outbox=recording(
            strict_order=False,
            retry_strategies=["exponential_backoff", "latest_available"],
            backoff={**FAST_BACKOFF, "min_seconds": 0.5, "max_seconds": 0.5},
        )
    )
    FAILURES["t"] = 1  # the first attempt (the older item) fails
    await create(container, [("1", "price_changed", b"old")])
    await create(container, [("1", "price_changed", b"new")])
    async with running_worker(container, registry):
        await wait_for(lambda: _all_delivered(container, 1), within=10)
        await wait_for(lambda: _count_status(container, ItemStatus.DISCARDED, 1), within=10)
    rows = await statuses(container)
    assert rows[1][0] == ItemStatus.DISCARDED
    assert rows[1][2] == "latest_available: a newer item of this key and event was delivered"
    assert rows[2][0] == ItemStatus.DELIVERED
    assert [payload for _, _, payload in CALLS["t"]] == [b"old", b"new"]


async def _count_status(container: Container, status: ItemStatus, expected: int) -> bool:
    return await count_status(container, status) == expected


async def test_without_strict_order_a_failing_item_does_not_block_its_key(
    container: Container,
) -> None:
    registry = make_registry(outbox=recording(strict_order=False, max_retries=0))
    await create(container, [("1", "e", "poison"), ("1", "e", b"after")])
    async with running_worker(container, registry):
        await wait_for(lambda: _all_delivered(container, 1), within=10)
    assert [p for _, _, p in CALLS["t"]] == [b"poison", b"after"]


async def test_strict_order_blocks_a_key_behind_its_failed_head(container: Container) -> None:
    registry = make_registry(outbox=recording(strict_order=True, max_retries=0))
    await create(
        container,
        [("1", "e", "poison"), ("1", "e", b"k1-a"), ("2", "e", b"k2-a"), ("1", "e", b"k1-b")],
    )
    async with running_worker(container, registry):
        await wait_for(lambda: _all_delivered(container, 1), within=10)
        await wait_for(lambda: _count_failed(container, 1), within=10)
        await _sleep_polls(registry.get(OUTBOX_BOX), 3)
        assert sorted(p for _, _, p in CALLS["t"]) == [b"k2-a", b"poison"]
        # An operator discards the failed head: the key moves on, in order.
        async with container.session_factory()() as session, session.begin():
            await session.execute(
                update(OutboxItem)
                .where(OutboxItem.id == 1)
                .values(status=int(ItemStatus.DISCARDED))
            )
        await wait_for(lambda: _all_delivered(container, 3), within=10)
    assert [p for k, _, p in CALLS["t"] if k == "1"] == [b"poison", b"k1-a", b"k1-b"]


async def _sleep_polls(box: Box, polls: int) -> None:
    await asyncio.sleep(box.config.poll_interval * polls)


async def test_the_hop_limit_fails_looping_items(container: Container) -> None:
    registry = make_registry(outbox=recording(max_hops=2))
    with handling(correlation_id="c", message_id="m", hop=2):
        await create(container, [("1", "e", b"loop")])
    await create(container, [("2", "e", b"fine")])
    async with running_worker(container, registry):
        await wait_for(lambda: _count_failed(container, 1), within=10)
        await wait_for(lambda: _all_delivered(container, 1), within=10)
    rows = await statuses(container)
    assert rows[1] == (ItemStatus.FAILED, 1, "hop limit exceeded: hop 3 > max_hops 2")
    assert [p for _, _, p in CALLS["t"]] == [b"fine"]


async def test_a_slow_transport_times_out_as_a_failed_attempt(container: Container) -> None:
    registry = make_registry(
        outbox={
            "transports": [transport(RecordingTransport, name="s", delay=1.0)],
            "transport_timeout_seconds": 0.1,
            "max_retries": 0,
        }
    )
    await create(container, [("1", "e", b"x")])
    async with running_worker(container, registry):
        await wait_for(lambda: _count_failed(container, 1), within=10)
    [(status, errors, last_error)] = (await statuses(container)).values()
    assert (status, errors, last_error) == (
        ItemStatus.FAILED,
        1,
        "TimeoutError: timed out after 0.1s",
    )


async def test_server_middlewares_wrap_every_batch_and_item(container: Container) -> None:
    seen: dict[str, list[int]] = {"batch": [], "item": []}

    async def batch_mw(box: Box, items: Sequence[ItemRecord], call_next: BatchNext) -> None:
        seen["batch"].append(len(items))
        await call_next()

    async def item_mw(box: Box, item: ItemRecord, call_next: ItemNext) -> None:
        await call_next()
        seen["item"].append(item.id)

    registry = make_registry(outbox=recording())
    await create(container, [(str(i), "e", b"x") for i in range(30)])
    middlewares = Middlewares(batch=[batch_mw], item=[item_mw])
    async with running_worker(container, registry, middlewares=middlewares):
        await wait_for(lambda: _all_delivered(container, 30), within=10)
    assert sum(seen["batch"]) == 30
    assert sorted(seen["item"]) == list(range(1, 31))


async def test_two_workers_share_the_buckets_and_take_over_when_one_leaves(
    container: Container,
) -> None:
    registry = make_registry(outbox=recording())
    buckets = registry.get(OUTBOX_BOX).config.bucket_count
    async with running_worker(container, registry) as first:
        async with running_worker(container, registry) as second:
            await wait_for(lambda: _split_evenly(first, second, buckets), within=10)
        await wait_for(lambda: _owns(first, buckets), within=10)


async def test_joining_and_leaving_hand_buckets_over_at_once_not_at_the_next_tick(
    container: Container,
) -> None:
    """With a rebalance tick of a minute, only the NOTIFY of a joining or leaving worker can
    move buckets within seconds."""
    registry = make_registry(outbox=recording())
    buckets = registry.get(OUTBOX_BOX).config.bucket_count
    async with running_worker(container, registry, rebalance_interval=60) as first:
        await wait_for(lambda: _owns(first, buckets), within=5)
        async with running_worker(container, registry, rebalance_interval=60) as second:
            # Within 5 s, not 60: the newcomer's NOTIFY.
            await wait_for(lambda: _split_evenly(first, second, buckets), within=5)
        await wait_for(lambda: _owns(first, buckets), within=5)  # the leaver's NOTIFY


async def _split_evenly(first: Worker, second: Worker, buckets: int) -> bool:
    a = first.ownership.boxes[OUTBOX_BOX].owned
    b = second.ownership.boxes[OUTBOX_BOX].owned
    return not (a & b) and len(a | b) == buckets and abs(len(a) - len(b)) <= 1


async def _owns(worker: object, buckets: int) -> bool:
    return len(worker.ownership.boxes[OUTBOX_BOX].owned) == buckets  # type: ignore[attr-defined]


async def test_retention_deletes_old_finished_items_and_never_pending_ones(
    container: Container,
) -> None:
    registry = make_registry(
        outbox={"retention": {"delivered": "PT1H", "failed": "P1D", "batch_size": 7}}
    )
    box = registry.get(OUTBOX_BOX)
    await create(container, [(str(i), "e", b"x") for i in range(40)])
    async with container.session_factory()() as session, session.begin():
        age = text("now() - interval '2 days'")
        await session.execute(
            update(OutboxItem)
            .where(OutboxItem.id <= 10)
            .values(status=int(ItemStatus.DELIVERED), created_at=age)
        )
        await session.execute(
            update(OutboxItem)
            .where(OutboxItem.id.between(11, 15))
            .values(status=int(ItemStatus.FAILED), created_at=age)
        )
        await session.execute(
            update(OutboxItem)
            .where(OutboxItem.id.between(16, 20))
            .values(status=int(ItemStatus.DISCARDED), created_at=text("now() - interval '2 hours'"))
        )
        await session.execute(
            update(OutboxItem).where(OutboxItem.id.between(21, 25)).values(created_at=age)
        )
        await session.execute(
            update(OutboxItem)
            .where(OutboxItem.id.between(26, 30))
            .values(status=int(ItemStatus.DELIVERED))
        )
    report = await purge(container.engine(), box)
    assert (report.delivered, report.failed_or_discarded) == (10, 5)
    rows = await statuses(container)
    assert sorted(rows) == list(range(16, 41))
    assert timedelta(hours=1) == box.config.retention.delivered


# Headers as stored (jsonb text) -> what the relay must see: exactly what `json.loads` makes
# of PostgreSQL's text, which is what the connection's jsonb codec gave before the claim read
# them as text. Numbers at and past the limits of 64 bits and of a double, text that needs
# escapes, nesting, and the values that mean "no headers".
ODD_HEADERS = [
    '{"correlation-id": "c-1", "hop": 0}',
    '{"name": "Zo\u00eb \u2603 \U0001f389", "quote": "a\\"b\\\\c", "ctl": "t\\tn\\nr\\r", '
    '"esc": "\\u00e9\\ud83c\\udf89", "k\u00e9y": "v"}',
    '{"big": 1180591620717411303424, "min64": -9223372036854775809, "max64": '
    '9223372036854775807, "huge": 1.5e300, "tiny": 5e-324, "dec": 0.1, "neg0": -0.0}',
    '{"a": {"b": [1, true, false, null, "x", {"c": []}]}, "": ""}',
    "{}",
    "null",
]


async def test_claimed_headers_are_what_json_makes_of_the_stored_text(
    container: Container,
) -> None:
    box = make_registry().get(OUTBOX_BOX)
    table = box.table_name
    processor = BoxProcessor(
        box, container.engine(), container.session_factory(), Middlewares(), keep_connections=True
    )
    async with container.engine().begin() as conn:
        for n, odd in enumerate(ODD_HEADERS):
            await conn.execute(
                text(
                    f"INSERT INTO {table} (uuid, event_name, event_key, bucket, payload, headers) "
                    "VALUES (gen_random_uuid(), 'e', :key, 0, '\\x00', CAST(:headers AS jsonb))"
                ),
                {"key": f"odd-{n}", "headers": odd},
            )
        # What the stored text is, and what the jsonb codec (json.loads) makes of it.
        rows = await conn.execute(text(f"SELECT event_key, headers::text FROM {table}"))
        stored: dict[str, str] = {key: value for key, value in rows.all()}
        rows = await conn.execute(text(f"SELECT event_key, headers FROM {table}"))
        decoded: dict[str, Any] = {key: value for key, value in rows.all()}
    try:
        claimed = await processor.claim(list(range(box.config.bucket_count)))
    finally:
        await processor.close()
    got = {item.event_key: item.headers for item, _ in claimed}
    assert sorted(got) == sorted(f"odd-{n}" for n in range(len(ODD_HEADERS)))
    for key, headers in got.items():
        assert headers == (json.loads(stored[key]) or {}) == (decoded[key] or {}), key
        assert type(headers) is dict
    assert got["odd-1"]["name"] == "Zo\u00eb \u2603 \U0001f389"
    assert got["odd-1"]["esc"] == "\u00e9\U0001f389"
    assert got["odd-1"]["quote"] == 'a"b\\c'
    assert got["odd-2"]["big"] == 2**70
    assert got["odd-2"]["min64"] == -(2**63) - 1
    assert type(got["odd-2"]["big"]) is int
    assert got["odd-2"]["dec"] == 0.1
    assert got["odd-3"]["a"]["b"] == [1, True, False, None, "x", {"c": []}]
    assert got["odd-4"] == got["odd-5"] == {}
