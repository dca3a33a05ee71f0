"""A box relayed by Debezium on real PostgreSQL: replay captures the items again in id order
(CLI and admin API path), retry is refused and changes nothing, stats show the capture,
and the worker claims nothing in it, purges old capture rows and warns about a missing
trigger."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from sqlalchemy import text

from outbox_engine.operations.actions import REPLAY, apply
from outbox_engine.operations.selection import Selection
from outbox_engine.relay.app import build_worker
from outbox_engine.relay.capture_upkeep import check_relays
from outbox_engine.relay.options import WorkerOptions
from outbox_engine.store.capture import CAPTURE_TABLE, HEARTBEAT_BOX, beat
from outbox_engine.store.status import ItemStatus

from ..debezium_ops_support import (
    Relays,
    captured_ids,
    create,
    install_trigger,
    relays,
    trigger_topic,
)
from ..ops_support import Spec, seed, snapshot, states
from ..support import INBOX_BOX, OUTBOX_BOX, make_registry, wait_for

__all__ = ["relays"]  # the fixture
# Slots and the capture trigger need PostgreSQL with wal_level=logical (marker connect).
pytestmark = pytest.mark.connect
DELIVERED, FAILED = ItemStatus.DELIVERED, ItemStatus.FAILED


async def test_replay_captures_the_selection_again_in_id_order(relays: Relays) -> None:
    container = relays.container
    ids = await seed(container, [Spec(k, status=DELIVERED) for k in "abcabc"] + [Spec("z")])
    result = relays.cli(
        "replay",
        "--box",
        OUTBOX_BOX,
        "--id-range",
        f"{ids[1]}:{ids[5]}",
        "--batch-size",
        "2",
        "--yes",
    )
    assert result.returncode == 0, result.stderr
    assert f"replay: changed 5 items of box {OUTBOX_BOX} in 3 batches" in result.stdout
    assert await captured_ids(container) == ids[1:6]
    assert [s for s, _ in (await states(container)).values()].count("delivered") == 6

    box = relays.box  # the admin API's path: one transaction, one audit row
    done = await apply(
        container.engine(), box, REPLAY, Selection.build(ids=[ids[3], ids[0]]), actor="t"
    )
    assert done.rows == 2
    assert await captured_ids(container) == [*ids[1:6], ids[0], ids[3]]
    dry = await apply(
        container.engine(), box, REPLAY, Selection.build(ids=[ids[2]]), True, actor="t"
    )
    assert dry.rows == 1
    assert len(await captured_ids(container)) == 7

    async with container.engine().connect() as conn:
        row = (
            await conn.execute(
                text(
                    f"SELECT box, message_id, topic, event_key FROM {CAPTURE_TABLE} "
                    "WHERE item_id = :id"
                ),
                {"id": ids[1]},
            )
        ).one()
        uuid = (
            await conn.execute(
                text(f"SELECT uuid::text FROM {box.table_name} WHERE id = :id"),
                {"id": ids[1]},
            )
        ).scalar_one()
    topic = make_registry().get(OUTBOX_BOX).transports[0].transport.topic  # type: ignore[attr-defined]
    assert tuple(row) == (OUTBOX_BOX, uuid, topic, "b")


async def test_retry_discard_park_are_refused_on_a_debezium_box(relays: Relays) -> None:
    container = relays.container
    await seed(container, [Spec("a", status=FAILED, errors=10), Spec("b")])
    before = await snapshot(container)
    for action in ("retry", "discard", "park"):
        result = relays.cli(action, "--box", OUTBOX_BOX, "--yes")
        assert result.returncode == 2, (action, result.stdout, result.stderr)
        assert f"box {OUTBOX_BOX} is relayed by Debezium (relay: debezium)" in result.stderr
        assert f"so {action} applies to none of them" in result.stderr
    assert await snapshot(container) == before
    worker_box = relays.cli("retry", "--box", OUTBOX_BOX, "--yes", relay="worker")
    assert worker_box.returncode == 0, worker_box.stderr
    assert "retry: changed 1 items" in worker_box.stdout


async def test_stats_show_the_relay_and_the_capture(relays: Relays) -> None:
    container = relays.container
    await install_trigger(container, relays.box)
    await create(container, "abc")
    result = relays.cli("stats", "--json")
    assert result.returncode == 0, result.stderr
    found = {s["box"]: s for s in json.loads(result.stdout)}
    assert found[INBOX_BOX]["relay"] is None
    outbox = found[OUTBOX_BOX]
    assert outbox["relay"] == "debezium"
    assert outbox["counts"]["delivered"] == 3
    capture = outbox["capture"]
    assert (capture["trigger"], capture["slot_exists"], capture["capture_rows"]) == (True, False, 3)
    assert capture["problems"] == [f"captured, but replication slot {relays.names.slot} is missing"]
    text_out = relays.cli("stats", "--box", OUTBOX_BOX).stdout
    assert f"slot {relays.names.slot} MISSING; 3 capture rows" in text_out
    assert "deepest" not in text_out
    plain = json.loads(relays.cli("stats", "--json", relay="worker").stdout)
    assert {s["box"]: s["relay"] for s in plain}[OUTBOX_BOX] == "worker"
    assert all(s["capture"] is None for s in plain)


async def test_the_worker_claims_nothing_and_purges_old_capture_rows(
    relays: Relays, caplog: pytest.LogCaptureFixture
) -> None:
    container = relays.container
    registry = make_registry(outbox={"relay": "debezium"})
    box = registry.get(OUTBOX_BOX)
    warnings = await check_relays(container.engine(), list(registry))
    assert len(warnings) == 1
    assert "has no capture trigger" in warnings[0]
    (stranded,) = await create(container, "s")  # before the trigger: stays pending
    await install_trigger(container, box)
    captured = await create(container, "abcde")
    async with container.engine().begin() as conn:
        await beat(conn, f"{relays.names.topic_prefix}.outbox-heartbeat")
        await conn.execute(
            text(
                f"UPDATE {CAPTURE_TABLE} SET captured_at = now() - interval '11 minutes' "
                "WHERE item_id = ANY(:old) OR box = :beat"
            ),
            {"old": captured[:2], "beat": HEARTBEAT_BOX},
        )
    options = WorkerOptions(
        rebalance_interval=0.2, shutdown_timeout=5.0, capture_upkeep_interval=0.2
    )
    worker = build_worker(
        registry, container.resources(), container.settings().asyncpg_dsn, options
    )
    assert box.name not in worker.ownership.boxes  # no bucket locks for it
    caplog.set_level(logging.INFO, "outbox_engine.relay.worker")
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(worker.ready.wait(), 10)

        async def purged() -> bool:
            return worker.upkeep.purged >= 3

        await wait_for(purged, within=20)
        await asyncio.sleep(1.5)  # lanes would have claimed the stranded item by now
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)
    assert worker.upkeep.purged == 3  # two items and the heartbeat, nothing younger
    assert await captured_ids(container) == captured[2:]
    found = await states(container)
    assert found[stranded] == ("pending", 0)
    assert [found[i] for i in captured] == [("delivered", 0)] * 5
    assert await trigger_topic(container) is not None
    assert "relayed by Debezium (not claimed here): " + OUTBOX_BOX in caplog.text


async def test_the_worker_warns_at_start_when_config_and_trigger_disagree(
    relays: Relays, caplog: pytest.LogCaptureFixture
) -> None:
    container = relays.container
    registry = make_registry(outbox={"relay": "debezium"})  # and no trigger on its table
    options = WorkerOptions(rebalance_interval=0.2, shutdown_timeout=5.0)
    worker = build_worker(
        registry, container.resources(), container.settings().asyncpg_dsn, options
    )
    caplog.set_level(logging.WARNING, "outbox_engine.relay.worker")
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(worker.ready.wait(), 10)

        async def warned() -> bool:
            return "has no capture trigger" in caplog.text

        await wait_for(warned, within=10)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)
    (line,) = [r.getMessage() for r in caplog.records if "capture trigger" in r.getMessage()]
    assert line.startswith(f"box {OUTBOX_BOX}: relay: debezium in the boxes file, but its table")


async def test_a_worker_with_only_debezium_boxes_starts_and_stops(relays: Relays) -> None:
    """`worker --box <a Debezium box>`: no lanes at all; stopping it must not fail."""
    container = relays.container
    registry = make_registry(outbox={"relay": "debezium"})
    options = WorkerOptions(boxes=(OUTBOX_BOX,), rebalance_interval=0.2, shutdown_timeout=5.0)
    worker = build_worker(
        registry, container.resources(), container.settings().asyncpg_dsn, options
    )
    assert [box.name for box in worker.debezium] == [OUTBOX_BOX]
    assert worker.relayed == []
    task = asyncio.create_task(worker.run())
    await asyncio.wait_for(worker.ready.wait(), 10)
    worker.stop()
    await asyncio.wait_for(task, 30)
    assert task.exception() is None
