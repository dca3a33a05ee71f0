"""Kafka Connect for the Debezium tests: where it is (TEST_CONNECT_URL), what its REST API
says about a connector, and the cleanup every test runs in `finally`: the connector deleted
and its replication slot dropped (a slot left behind retains WAL forever, and PostgreSQL
refuses to drop a database that still has one).

Without TEST_CONNECT_URL the tests fail with HOW_TO (they are not skipped: a suite that
claims to test the Debezium relay must not pass without running it)."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg  # type: ignore[import-untyped]
import httpx

POSTGRES_CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"

HOW_TO = (
    "The Debezium tests (tests/debezium) need Kafka Connect (distributed mode) with Debezium "
    "3.3 and its PostgreSQL connector, on the Kafka of TEST_KAFKA_BOOTSTRAP_SERVERS, able to "
    "reach the PostgreSQL of TEST_DATABASE_URL (which needs wal_level=logical and a user with "
    "the REPLICATION attribute). Export its REST address:\n"
    "  TEST_CONNECT_URL=http://host:8083\n"
    "and, when Connect reaches that PostgreSQL under another address than the tests do (a "
    "container), that address:\n"
    "  TEST_CONNECT_DATABASE_HOST=postgres:5432\n"
    "E.g. `docker compose --profile debezium up` (Connect on 127.0.0.1:8083; see "
    "docs/debezium.md), or the native scripts of the template repository "
    "(scripts/connect.sh up prints the export; its scripts/test.sh sets it). Leave these "
    "tests out with -m 'not connect'."
)
FAULT_HOW_TO = (
    "set {names} to commands that {what} (the template's scripts/test.sh exports them for "
    "its own services, e.g. TEST_CONNECT_KILL_CMD='scripts/connect.sh kill', "
    "TEST_CONNECT_START_CMD='scripts/connect.sh up', TEST_PG_STOP_CMD='scripts/postgres.sh "
    "down', TEST_KAFKA_STOP_CMD='scripts/kafka.sh down'). Leave the fault tests out with "
    "-m 'not slow'."
)


class ConnectUnavailable(RuntimeError):
    pass


def connector_database_url(database_url: str) -> str:
    """`database_url` as Kafka Connect reaches it: with the host[:port] of
    TEST_CONNECT_DATABASE_HOST when set (Connect in a container), else unchanged."""
    host = os.environ.get("TEST_CONNECT_DATABASE_HOST", "")
    if not host:
        return database_url
    parts = urlsplit(database_url)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@{host}" if credentials else host
    return urlunsplit(parts._replace(netloc=netloc))


def connect_url() -> str:
    """TEST_CONNECT_URL, checked: Connect answers and has the PostgreSQL connector."""
    url = os.environ.get("TEST_CONNECT_URL", "").rstrip("/")
    if not url:
        raise ConnectUnavailable("TEST_CONNECT_URL is not set.\n" + HOW_TO)
    try:
        plugins = httpx.get(f"{url}/connector-plugins", timeout=10).json()
    except (httpx.HTTPError, ValueError) as exc:
        raise ConnectUnavailable(
            f"Kafka Connect at {url} does not answer: {exc}\n" + HOW_TO
        ) from None
    classes = {str(p.get("class")) for p in plugins if isinstance(p, dict)}
    if POSTGRES_CONNECTOR not in classes:
        raise ConnectUnavailable(
            f"Kafka Connect at {url} has no {POSTGRES_CONNECTOR} (plugins: "
            f"{', '.join(sorted(classes))}).\n" + HOW_TO
        )
    return url


def connector_status(url: str, name: str) -> dict[str, Any] | None:
    """GET /connectors/NAME/status, or None while Connect does not know it (or is down)."""
    try:
        response = httpx.get(f"{url}/connectors/{name}/status", timeout=10)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    status = response.json()
    return status if isinstance(status, dict) else None


def states(status: dict[str, Any] | None) -> list[str]:
    """[connector state, task states...] of a status answer."""
    if not status:
        return []
    return [status["connector"]["state"], *(task["state"] for task in status.get("tasks", []))]


def failed_trace(status: dict[str, Any] | None) -> str:
    if not status:
        return ""
    traces = [status["connector"].get("trace", "")]
    traces += [task.get("trace", "") for task in status.get("tasks", [])]
    return "\n".join(t for t in traces if t)[:4000]


def delete_connector(url: str, name: str, within: float = 30.0) -> None:
    """DELETE the connector (never registered: nothing to do) and wait until it is gone."""
    deadline = time.monotonic() + within
    while True:
        try:
            response = httpx.delete(f"{url}/connectors/{name}", timeout=30)
            if response.status_code in (204, 404):
                break
        except httpx.HTTPError:
            pass  # Connect restarting (a fault test): ask again
        if time.monotonic() > deadline:
            raise AssertionError(f"connector {name} could not be deleted from {url}")
        time.sleep(1.0)
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/connectors/{name}", timeout=10).status_code == 404:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)


async def _admin(server_url: str, statement: str, *args: Any) -> list[Any]:
    conn = await asyncpg.connect(server_url.replace("postgresql+asyncpg://", "postgresql://", 1))
    try:
        return list(await conn.fetch(statement, *args))
    finally:
        await conn.close()


async def slot_exists(server_url: str, slot: str) -> bool:
    rows = await _admin(server_url, "SELECT 1 FROM pg_replication_slots WHERE slot_name = $1", slot)
    return bool(rows)


async def drop_slot(server_url: str, slot: str, within: float = 30.0) -> bool:
    """Drop the slot once its WAL sender is gone (terminated after half of `within`); True
    when it existed. Fails loudly if it cannot: the slot would retain WAL forever."""
    deadline = time.monotonic() + within
    terminate_at = time.monotonic() + within / 2
    query = "SELECT active, active_pid FROM pg_replication_slots WHERE slot_name = $1"
    while True:
        rows = await _admin(server_url, query, slot)
        if not rows:
            return False
        active, pid = rows[0]["active"], rows[0]["active_pid"]
        if not active:
            try:
                await _admin(server_url, "SELECT pg_drop_replication_slot($1)", slot)
                return True
            except asyncpg.PostgresError:
                pass  # taken again by a WAL sender in between
        elif pid is not None and time.monotonic() >= terminate_at:
            await _admin(server_url, "SELECT pg_terminate_backend($1)", pid)
        if time.monotonic() > deadline:
            raise AssertionError(
                f"replication slot {slot} is still active after {within:.0f}s: drop it by hand "
                f"(SELECT pg_drop_replication_slot('{slot}')), it retains WAL"
            )
        await asyncio.sleep(0.3)
