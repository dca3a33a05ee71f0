"""One test's service relayed by Debezium: its own database (migrated), topics, boxes file,
container, publication, replication slot and connector, all removed afterwards whatever
happens (`debezium_service`).

The test boxes are the configured ones with the outbox box strict, quick to retry and on
the test's topic (6 partitions); the inbox box reads `inbox_topic` (by default the outbox
topic: the "other service" of the inbox test reads what Debezium relayed) and applies
messages with the guarantees suite's `EffectHandler` (one effect row per handled message).

The Debezium names are the service's with a suffix of the test's own: replication slots and
Connect connectors are cluster-wide, and Debezium keys its stored offsets by `topic.prefix`,
so two tests (or a test and a teammate's service) never share one.
"""

from __future__ import annotations

import asyncio
import copy
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import yaml
from sqlalchemy import func, select, text

from {{ cookiecutter.package_name }}.container import Container, shutdown
from {{ cookiecutter.package_name }}.settings import Settings
from outbox_engine.config.boxes import parse_boxes
from outbox_engine.config.registry import Box, BoxRegistry
from outbox_engine.debezium.connector import DebeziumNames, connector_config
from outbox_engine.debezium.register import register
from outbox_engine.debezium.switch import SwitchReport, switch_to_debezium, switch_to_worker
from outbox_engine.store.capture import capture_table
from outbox_engine.store.status import ItemStatus

from ..guarantees.kafka_admin import create_topics
from ..guarantees.transports import CREATE_EFFECTS_TABLE, EffectHandler
from ..support import INBOX_BOX, OUTBOX_BOX, OutboxItem, boxes_yaml, migrate, transport
from .connect import (
    connector_database_url,
    connector_status,
    delete_connector,
    drop_slot,
    states,
)
from .messages import delete_topics

PACKAGE = "{{ cookiecutter.package_name }}"
SLUG = "{{ cookiecutter.project_slug }}"


def test_boxes(topic: str, inbox_topic: str, relay: str) -> dict[str, Any]:
    raw = copy.deepcopy(boxes_yaml())
    outbox = raw["outbox"][OUTBOX_BOX]
    outbox.update(
        {
            "relay": relay,
            "strict_order": True,
            "backoff": {"min_seconds": 0.5, "max_seconds": 5, "multiplier": 2, "jitter": 0.2},
            "max_retries": 200,
            "poll_interval": 0.2,
        }
    )
    for configured in outbox["transports"]:
        configured.setdefault("args", {})["topic"] = topic
    inbox = raw["inbox"][INBOX_BOX]
    inbox.update(
        {
            "topics": [inbox_topic],
            "group_id": f"{inbox_topic}-group",
            "transports": [transport(EffectHandler)],
            "poll_interval": 0.2,
            "session_timeout_ms": 6000,
        }
    )
    return raw


def write_boxes(workdir: Path, raw: dict[str, Any]) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "boxes.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@dataclass
class DebeziumService:
    label: str
    server_url: str  # the TEST_DATABASE_URL server (admin)
    database_url: str
    bootstrap: str
    connect_url: str
    topic: str
    inbox_topic: str
    workdir: Path
    container: Container
    names: DebeziumNames
    timings: dict[str, float] = field(default_factory=dict)

    def raw_boxes(self, relay: str) -> dict[str, Any]:
        return test_boxes(self.topic, self.inbox_topic, relay)

    def registry(self, relay: str) -> BoxRegistry:
        """The test boxes with the outbox box's `relay` set (what a worker restarted after
        editing boxes.yaml reads)."""
        return BoxRegistry(parse_boxes(self.raw_boxes(relay), f"{self.label} boxes"))

    def box(self, relay: str = "debezium") -> Box:
        return self.registry(relay).get(OUTBOX_BOX)

    @property
    def engine(self) -> Any:
        return self.container.engine()

    async def register(self) -> None:
        """Publication and slot, then the connector (RUNNING, task RUNNING)."""
        config = connector_config(self.names, connector_database_url(self.database_url))
        registration = await register(self.engine, self.connect_url, self.names, config, 120.0)
        assert registration.slot_created
        assert registration.publication_created
        self.timings["register"] = registration.seconds

    async def to_debezium(self) -> SwitchReport:
        started = time.monotonic()
        report = await switch_to_debezium(self.engine, self.box("worker"), self.names)
        self.timings["switch_to_debezium"] = time.monotonic() - started
        return report

    async def to_worker(self, timeout_s: float = 120.0) -> SwitchReport:
        started = time.monotonic()
        report = await switch_to_worker(self.engine, self.box("debezium"), self.names, timeout_s)
        self.timings["switch_to_worker"] = time.monotonic() - started
        return report

    async def pending(self) -> int:
        async with self.container.session_factory()() as session:
            query = select(func.count()).where(OutboxItem.status == int(ItemStatus.PENDING))
            return int((await session.execute(query)).scalar_one())

    async def captured(self) -> int:
        """Capture rows of the outbox box (heartbeats are capture rows of their own)."""
        async with self.engine.connect() as conn:
            query = select(func.count()).where(capture_table.c.box == OUTBOX_BOX)
            return int((await conn.execute(query)).scalar_one())

    def connector_states(self) -> list[str]:
        return states(connector_status(self.connect_url, self.names.connector))


async def _admin(server_url: str, statement: str) -> None:
    conn = await asyncpg.connect(server_url.replace("postgresql+asyncpg://", "postgresql://", 1))
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


@asynccontextmanager
async def debezium_service(
    label: str,
    server_url: str,
    bootstrap: str,
    connect_url: str,
    workdir: Path,
    *,
    inbox_topic: str | None = None,
    relay: str = "worker",
) -> AsyncIterator[DebeziumService]:
    """A fresh database (migrated), a 6-partition topic, the boxes file (outbox `relay` as
    given) and a container on them; the Debezium names of this test. Not registered yet:
    call `register()`. Afterwards: connector deleted, slot dropped, database and topics
    dropped, even when the test failed."""
    suffix = uuid.uuid4().hex[:8]
    started = time.monotonic()
    name = f"dbz_{label.replace('-', '_')}_{suffix}"
    await _admin(server_url, f'CREATE DATABASE "{name}"')
    database_url = f"{server_url.rpartition('/')[0]}/{name}"
    topic = f"dbz-{label}-{suffix}"
    inbox = inbox_topic or topic
    names = DebeziumNames(
        connector=f"{SLUG}-outbox-{label}-{suffix}",
        slot=f"{PACKAGE}_outbox_{suffix}",
        publication=f"{PACKAGE}_outbox",
        topic_prefix=f"{PACKAGE}_{suffix}",
    )
    container: Container | None = None
    try:
        await asyncio.to_thread(migrate, database_url)
        await asyncio.to_thread(create_topics, bootstrap, [topic], {})
        boxes = await asyncio.to_thread(write_boxes, workdir, test_boxes(topic, inbox, relay))
        container = Container()
        container.settings.override(
            Settings(
                database_url=database_url,
                kafka_bootstrap_servers=bootstrap,
                boxes_file=boxes,
                log_format="text",
            )
        )
        container.producer().start()
        async with container.engine().begin() as conn:
            await conn.execute(text(CREATE_EFFECTS_TABLE))
        service = DebeziumService(
            label,
            server_url,
            database_url,
            bootstrap,
            connect_url,
            topic,
            inbox,
            workdir,
            container,
            names,
        )
        service.timings["setup"] = time.monotonic() - started
        yield service
    finally:
        try:
            await asyncio.to_thread(delete_connector, connect_url, names.connector)
        finally:
            try:
                await drop_slot(server_url, names.slot)
            finally:
                if container is not None:
                    await shutdown(container)
                await _admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                await asyncio.to_thread(delete_topics, bootstrap, [topic, names.heartbeat_topic])
