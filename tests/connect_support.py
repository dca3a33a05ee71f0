"""Helpers for tests that run Debezium on the Kafka Connect worker of scripts/connect.sh:
start it, talk to its REST API, wait for a connector, read its topic, and clean up the
replication slot a connector leaves in PostgreSQL (a slot left behind retains WAL forever).

Used by tests/test_connect_native.py; kept apart so later Debezium tests share them.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import asyncpg
from confluent_kafka import Consumer

from conftest import REPO_ROOT, clean_env, run

CONNECT_SH = REPO_ROOT / "scripts" / "connect.sh"
POSTGRES_CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"
EVENT_ROUTER = "io.debezium.transforms.outbox.EventRouter"
BYTE_ARRAY_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"
DRAIN_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Connect:
    """A running worker: its REST URL and the bootstrap servers of its Kafka."""

    url: str
    kafka: str


def http(method: str, url: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{method} {url}: HTTP {exc.code}: {exc.read().decode()}") from exc
    return json.loads(raw) if raw else None


def connect_up(kafka: str) -> tuple[str, float, str]:
    """Run `connect.sh up` against the test Kafka: (TEST_CONNECT_URL, seconds, its output)."""
    host, _, port = kafka.rpartition(":")
    assert host == "127.0.0.1", f"connect.sh runs a worker for a local broker only, not {kafka}"
    started = time.monotonic()
    result = run(
        [CONNECT_SH, "up"], cwd=REPO_ROOT, env=clean_env(OUTBOX_KAFKA_PORT=port), timeout=600
    )
    elapsed = time.monotonic() - started
    exports = dict(
        line.removeprefix("export ").split("=", 1)
        for line in result.stdout.splitlines()
        if line.startswith("export ")
    )
    assert "TEST_CONNECT_URL" in exports, result.stdout
    return exports["TEST_CONNECT_URL"], elapsed, result.stdout


async def admin(url: str, *statements: str) -> list[Any]:
    conn = await asyncpg.connect(url)
    try:
        return [await conn.fetch(statement) for statement in statements]
    finally:
        await conn.close()


async def slot_active(url: str, slot: str) -> bool:
    (rows,) = await admin(
        url, f"SELECT active FROM pg_replication_slots WHERE slot_name = '{slot}'"
    )
    return bool(rows and rows[0]["active"])


async def drop_slot(url: str, slot: str) -> None:
    """Drop the slot once its WAL sender is gone (terminating it after 20 s)."""
    deadline = time.monotonic() + 20
    while await slot_active(url, slot) and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    await admin(
        url,
        "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots"
        f" WHERE slot_name = '{slot}' AND active_pid IS NOT NULL",
    )
    for _ in range(20):
        (rows,) = await admin(url, f"SELECT 1 FROM pg_replication_slots WHERE slot_name = '{slot}'")
        if not rows:
            return
        if not await slot_active(url, slot):
            await admin(url, f"SELECT pg_drop_replication_slot('{slot}')")
            return
        await asyncio.sleep(0.5)
    raise AssertionError(f"replication slot {slot} is still active: drop it by hand")


def delete_connector(connect: Connect, name: str) -> None:
    request = urllib.request.Request(f"{connect.url}/connectors/{name}", method="DELETE")
    try:
        urllib.request.urlopen(request, timeout=30).close()
    except urllib.error.HTTPError as exc:
        if exc.code != 404:  # never registered: nothing to delete
            raise


def wait_running(connect: Connect, name: str, db_url: str, slot: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            status = http("GET", f"{connect.url}/connectors/{name}/status")
        except AssertionError:
            status = None
        if status:
            states = [status["connector"]["state"], *(t["state"] for t in status["tasks"])]
            assert "FAILED" not in states, json.dumps(status, indent=1)[:4000]
            if (
                len(states) == 2
                and set(states) == {"RUNNING"}
                and asyncio.run(slot_active(db_url, slot))
            ):
                return
        time.sleep(0.5)
    raise AssertionError(f"connector {name} not running with an active slot after 60 s")


def consume(kafka: str, topic: str, expected: int) -> tuple[list[Any], float]:
    """Read `topic` until `expected` messages and 2 quiet seconds more (or the timeout):
    (messages, monotonic time the last one arrived)."""
    consumer = Consumer(
        {
            "bootstrap.servers": kafka,
            "group.id": f"{topic}-reader",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    messages: list[Any] = []
    last = time.monotonic()
    try:
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        quiet_until = None
        while time.monotonic() < deadline:
            batch = consumer.consume(500, timeout=0.5)
            for message in batch:
                assert message.error() is None, message.error()
                messages.append(message)
                last = time.monotonic()
            if len(messages) >= expected:
                # Two more quiet seconds: anything beyond `expected` is a duplicate.
                quiet_until = quiet_until or time.monotonic() + 2
                if time.monotonic() >= quiet_until:
                    break
    finally:
        consumer.close()
    return messages, last
