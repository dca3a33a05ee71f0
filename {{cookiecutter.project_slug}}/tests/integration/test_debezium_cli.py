"""debezium-config, debezium-switch and debezium-status against real PostgreSQL (and the real
Kafka Connect at TEST_CONNECT_URL for --register): the printed JSON is the engine's, a
registration leaves a running connector and a slot, a switch moves exactly the pending
items (in id order) and the trigger, and each wrong state makes debezium-status exit 1."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from sqlalchemy import text

from {{ cookiecutter.package_name }}.container import Container
from {{ cookiecutter.package_name }}.ops.debezium_output import config_document
from outbox_engine.debezium.register import ensure_publication_and_slot
from outbox_engine.store import slots
from outbox_engine.store.pauses import list_pauses
from outbox_engine.store.status import ItemStatus

from ..debezium_ops_support import (
    Relays,
    captured_ids,
    connect,
    create,
    install_trigger,
    relays,
    trigger_topic,
)
from ..ops_support import Spec, seed, states
from ..support import INBOX_BOX, OUTBOX_BOX, wait_for

__all__ = ["connect", "relays"]  # the fixtures
PENDING, FAILED, DELIVERED = ItemStatus.PENDING, ItemStatus.FAILED, ItemStatus.DELIVERED
# Slots need PostgreSQL with wal_level=logical, --register a Kafka Connect with Debezium.
pytestmark = pytest.mark.connect


async def test_config_prints_the_engines_connector_json(relays: Relays) -> None:
    result = relays.cli("debezium-config", relay="worker")  # no Debezium box is needed
    assert result.returncode == 0, result.stderr
    url = relays.container.settings().database_url
    assert json.loads(result.stdout) == config_document(relays.names, url)
    other = relays.cli("debezium-config", "--database-url", "postgresql://c:pw@pg:6000/x")
    config = json.loads(other.stdout)["config"]
    assert (config["database.hostname"], config["database.port"]) == ("pg", "6000")
    assert config["slot.name"] == relays.names.slot


async def test_register_runs_the_connector_then_status_is_clean(
    relays: Relays, connect: str
) -> None:
    first = await asyncio.to_thread(
        relays.cli, "debezium-config", "--register", "--connect-url", connect, "--timeout", "120"
    )
    assert first.returncode == 0, first.stderr
    assert f"connector {relays.names.connector} RUNNING on {connect}" in first.stdout
    assert f"publication {relays.names.publication} created" in first.stdout
    assert f"slot {relays.names.slot} created" in first.stdout
    again = await asyncio.to_thread(
        relays.cli, "debezium-config", "--register", "--connect-url", connect
    )
    assert again.returncode == 0, again.stderr
    assert f"slot {relays.names.slot} already there" in again.stdout
    switched = relays.cli("debezium-switch", OUTBOX_BOX, "--to", "debezium", "--yes")
    assert switched.returncode == 0, switched.stderr

    async def streaming() -> bool:
        async with relays.container.engine().connect() as conn:
            return (await slots.slot_state(conn, relays.names.slot)).active

    await wait_for(streaming, within=60)
    status = relays.cli("debezium-status", "--json")
    assert status.returncode == 0, (status.stdout, status.stderr)
    (box,) = json.loads(status.stdout)
    assert (box["relay"], box["trigger"], box["slot"]["active"], box["problems"]) == (
        "debezium",
        True,
        True,
        [],
    )


async def test_an_unreachable_connect_exits_3_and_leaves_no_slot(relays: Relays) -> None:
    down = relays.cli("debezium-config", "--register", "--connect-url", "http://127.0.0.1:9")
    assert down.returncode == 3, (down.stdout, down.stderr)
    assert "Kafka Connect at http://127.0.0.1:9 cannot be reached" in down.stderr
    assert "check --connect-url (CONNECT_URL)" in down.stderr
    async with relays.container.engine().connect() as conn:
        assert (await slots.slot_state(conn, relays.names.slot)).exists is False


async def test_a_connector_connect_refuses_exits_1_with_its_reason(
    relays: Relays, connect: str
) -> None:
    url = relays.container.settings().database_url
    wrong = url.replace("://", "://nobody_here:wrong@", 1).split("@", 1)
    bad_login = f"{wrong[0]}@{url.split('@', 1)[1]}"
    refused = await asyncio.to_thread(
        relays.cli,
        "debezium-config",
        "--register",
        "--connect-url",
        connect,
        "--database-url",
        bad_login,
        "--timeout",
        "60",
    )
    assert refused.returncode == 1, (refused.stdout, refused.stderr)
    assert "nobody_here" in refused.stderr or "FAILED" in refused.stderr, refused.stderr
    assert refused.stdout == ""


async def _advance_slot(container: Container, slot: str, done: asyncio.Event) -> None:
    """Stand in for Debezium: confirm the slot up to the current WAL position, repeatedly."""
    while not done.is_set():
        async with container.engine().connect() as conn:
            await conn.execute(
                text("SELECT pg_replication_slot_advance(:slot, pg_current_wal_lsn())"),
                {"slot": slot},
            )
            await conn.commit()
        await asyncio.sleep(0.3)


async def test_switch_hands_over_pending_items_in_id_order_and_back(relays: Relays) -> None:
    container = relays.container
    ids = await seed(container, [Spec(k) for k in "abcab"] + [Spec("c", status=DELIVERED)])
    await ensure_publication_and_slot(container.engine(), relays.names)
    to_debezium = relays.cli("debezium-switch", OUTBOX_BOX, "--to", "debezium", "--yes")
    assert to_debezium.returncode == 0, to_debezium.stderr
    lines = to_debezium.stdout.splitlines()
    assert "5 pending items handed over in id order; capture trigger installed" in lines[0]
    assert lines[1].startswith("the boxes file already says relay: debezium")
    assert await captured_ids(container) == ids[:5]
    assert {s for s, _ in (await states(container)).values()} == {"delivered"}
    assert await trigger_topic(container) is not None
    (captured,) = await create(container, "d")  # captured as it is inserted
    assert await captured_ids(container) == [*ids[:5], captured]
    assert (await states(container))[captured] == ("delivered", 0)

    done = asyncio.Event()
    advancing = asyncio.create_task(_advance_slot(container, relays.names.slot, done))
    try:
        back = await asyncio.to_thread(
            relays.cli, "debezium-switch", OUTBOX_BOX, "--to", "worker", "--yes", "--timeout", "30"
        )
    finally:
        done.set()
        await advancing
    assert back.returncode == 0, back.stderr
    assert "capture trigger dropped; Debezium confirmed WAL position" in back.stdout
    assert f"now set `relay: worker` for box {OUTBOX_BOX}" in back.stdout
    assert await trigger_topic(container) is None
    assert await list_pauses(container.engine(), OUTBOX_BOX) == []
    (new_id,) = await create(container, "e")
    assert (await states(container))[new_id] == ("pending", 0)
    assert len(await captured_ids(container)) == 6


async def test_switch_refusals_change_nothing(relays: Relays) -> None:
    container = relays.container
    await seed(container, [Spec("a"), Spec("b", status=FAILED, errors=10)])
    before = await states(container)
    for args, code, message in (
        (("nope",), 2, "unknown box 'nope'"),
        ((INBOX_BOX,), 2, f"box {INBOX_BOX} is an inbox box"),
        ((OUTBOX_BOX,), 2, f"replication slot {relays.names.slot} does not exist"),
    ):
        result = relays.cli("debezium-switch", *args, "--to", "debezium", "--yes")
        assert result.returncode == code, (args, result.stdout, result.stderr)
        assert message in result.stderr
    no_tty = relays.cli("debezium-switch", OUTBOX_BOX, "--to", "debezium")
    assert no_tty.returncode == 2
    assert "pass --yes" in no_tty.stderr
    await ensure_publication_and_slot(container.engine(), relays.names)
    strict = relays.cli("debezium-switch", OUTBOX_BOX, "--to", "debezium", "--yes")
    assert strict.returncode == 2
    assert "is strict and has 1 item(s) failed for good" in strict.stderr
    assert await states(container) == before
    assert await trigger_topic(container) is None
    assert await captured_ids(container) == []


async def _status(relays: Relays, relay: str) -> tuple[int, dict[str, Any]]:
    result = relays.cli("debezium-status", "--json", relay=relay)
    (box,) = json.loads(result.stdout)
    return result.returncode, box


async def test_status_exits_1_for_each_wrong_state(relays: Relays) -> None:
    container = relays.container
    code, box = await _status(relays, "worker")
    assert (code, box["relay"], box["trigger"], box["problems"]) == (0, "worker", False, [])

    await seed(container, [Spec("a"), Spec("b")])
    code, box = await _status(relays, "debezium")  # configured, but no trigger
    assert code == 1
    assert box["pending"] == 2
    assert box["problems"] == [
        "configured for Debezium but not captured: 2 pending item(s) nobody sends "
        "(debezium-switch --to debezium)"
    ]
    text_out = relays.cli("debezium-status")
    assert text_out.returncode == 1
    assert f"{OUTBOX_BOX}\trelay debezium\tno trigger\tslot {relays.names.slot} missing" in (
        text_out.stdout
    )

    await install_trigger(container, relays.box)  # trigger, but no slot
    code, box = await _status(relays, "debezium")
    assert code == 1
    assert box["problems"] == [f"captured, but replication slot {relays.names.slot} is missing"]

    await ensure_publication_and_slot(container.engine(), relays.names)  # nobody streams it
    await create(container, "c")
    code, box = await _status(relays, "debezium")
    assert (code, box["capture_rows"], box["slot"]["exists"], box["slot"]["active"]) == (
        1,
        1,
        True,
        False,
    )
    assert box["slot"]["lag_bytes"] > 0
    (problem,) = box["problems"]
    assert "is not streaming" in problem

    code, box = await _status(relays, "worker")  # the trigger on a relay: worker box
    assert code == 1
    assert any("configured `relay: worker`" in p for p in box["problems"])
