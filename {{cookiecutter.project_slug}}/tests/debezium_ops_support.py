"""Helpers of the Debezium operator tests: a boxes file with `relay: debezium`, names of this
test alone (slots and connectors are named cluster-wide, and teammates' runs share the
server), the CLI with both, and a cleanup that leaves no slot, publication, trigger or
capture row behind (a slot left over keeps WAL forever and blocks DROP DATABASE)."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import text

from {{ cookiecutter.package_name }}.container import Container
from {{ cookiecutter.package_name }}.debezium_names import debezium_names
from outbox_engine.config.registry import Box
from outbox_engine.debezium.connector import DebeziumNames
from outbox_engine.debezium.register import unregister
from outbox_engine.store import capture, slots

from .debezium.connect import ConnectUnavailable, connect_url
from .ops_support import TABLE, run_cli
from .support import OUTBOX_BOX, boxes_yaml, make_registry, service_env


@dataclass(frozen=True)
class Relays:
    """This test's names, and the boxes files with the outbox box relayed either way."""

    suffix: str
    names: DebeziumNames
    debezium_file: Path
    worker_file: Path
    container: Container

    def env(self, relay: str = "debezium", **extra: str) -> dict[str, str]:
        boxes = self.debezium_file if relay == "debezium" else self.worker_file
        return service_env(
            self.container,
            BOXES_FILE=str(boxes),
            DEBEZIUM_NAME_SUFFIX=self.suffix,
            **extra,
        )

    def cli(self, *args: str, relay: str = "debezium", **extra: str) -> Any:
        return run_cli(*args, env=self.env(relay, **extra))

    @property
    def box(self) -> Box:
        return make_registry(outbox={"relay": "debezium"}).get(OUTBOX_BOX)


def _write_boxes(path: Path, relay: str, topic: str) -> Path:
    raw = boxes_yaml()
    raw["outbox"][OUTBOX_BOX]["relay"] = relay
    raw["outbox"][OUTBOX_BOX]["transports"][0]["args"]["topic"] = topic
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.fixture
def connect() -> str:
    """TEST_CONNECT_URL, checked; else the test fails saying how to provide it."""
    try:
        return connect_url()
    except ConnectUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
async def relays(container: Container, tmp_path: Path) -> AsyncIterator[Relays]:
    suffix = f"t{uuid.uuid4().hex[:10]}"
    settings = container.settings().model_copy(update={"debezium_name_suffix": suffix})
    topic = make_registry().get(OUTBOX_BOX).transports[0].transport.topic  # type: ignore[attr-defined]
    found = Relays(
        suffix,
        debezium_names(settings),
        _write_boxes(tmp_path / "debezium.yaml", "debezium", topic),
        _write_boxes(tmp_path / "worker.yaml", "worker", topic),
        container,
    )
    try:
        yield found
    finally:
        await cleanup(container, found.names)


async def cleanup(container: Container, names: DebeziumNames) -> None:
    connect = os.environ.get("TEST_CONNECT_URL")
    if connect:
        with contextlib.suppress(Exception):
            await unregister(connect, names.connector)
    engine = container.engine()
    await slots.drop_slot(engine, names.slot)
    async with engine.begin() as conn:
        await conn.execute(text(f'DROP PUBLICATION IF EXISTS "{names.publication}"'))
        await capture.drop_capture(conn, TABLE)
        await conn.execute(text(f"TRUNCATE {capture.CAPTURE_TABLE} RESTART IDENTITY"))


async def captured_ids(container: Container) -> list[int]:
    """The item ids in the capture table, in capture order (heartbeats left out)."""
    async with container.engine().connect() as conn:
        rows = await conn.execute(
            text(f"SELECT item_id FROM {capture.CAPTURE_TABLE} WHERE box <> :beat ORDER BY id"),
            {"beat": capture.HEARTBEAT_BOX},
        )
        return [int(r[0]) for r in rows]


async def trigger_topic(container: Container) -> str | None:
    async with container.engine().connect() as conn:
        return await capture.capture_installed(conn, TABLE)


async def install_trigger(container: Container, box: Box) -> None:
    from outbox_engine.debezium.connector import debezium_topic

    async with container.engine().begin() as conn:
        await capture.install_capture(conn, box.table_name, box.name, debezium_topic(box))


async def create(container: Container, keys: str) -> list[int]:
    """Create one item per key as a service does (no status set afterwards); their ids."""
    from .support import OutboxItem

    async with container.session_factory()() as session, session.begin():
        await container.outbox().create_batch(
            session, OutboxItem, [{"event_key": k, "event_name": "e", "payload": {}} for k in keys]
        )
        rows = await session.execute(
            text(f"SELECT id FROM {TABLE} ORDER BY id DESC LIMIT :n"), {"n": len(keys)}
        )
        return sorted(int(r[0]) for r in rows)
