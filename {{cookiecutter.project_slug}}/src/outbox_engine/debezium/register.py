"""Registering the service's connector: the publication and slot in PostgreSQL first (so
nothing captured after this is ever outside the slot's WAL), then the configuration on
Kafka Connect's REST API (`PUT /connectors/NAME/config`, idempotent), then waiting until the
connector and its task run. A FAILED task is an error carrying Connect's trace."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.debezium.connector import DebeziumNames
from outbox_engine.store import slots


class ConnectError(RuntimeError):
    """Kafka Connect refused the connector, failed it, or cannot be reached."""


class ConnectUnreachable(ConnectError):
    """Kafka Connect does not answer at all."""


async def check_reachable(connect_url: str) -> None:
    """ConnectUnreachable unless Kafka Connect answers `GET /`. `register` checks this before
    it creates the slot: a slot nobody reads keeps WAL on the primary."""
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            (await client.get(connect_url.rstrip("/") + "/")).raise_for_status()
    except httpx.HTTPError as exc:
        raise ConnectUnreachable(
            f"Kafka Connect at {connect_url} cannot be reached: {exc}"
        ) from None


@dataclass(frozen=True)
class Registration:
    publication_created: bool
    slot_created: bool
    seconds: float


async def ensure_publication_and_slot(
    engine: AsyncEngine, names: DebeziumNames
) -> tuple[bool, bool]:
    async with engine.begin() as conn:
        level = await slots.wal_level(conn)
        if level != "logical":
            raise slots.ReplicationSetupError(
                f"PostgreSQL runs with wal_level={level}; Debezium needs wal_level=logical "
                "(set it in postgresql.conf or with -c wal_level=logical, then restart)"
            )
        publication = await slots.ensure_publication(conn, names.publication)
    slot = await slots.ensure_slot(engine, names.slot)
    return publication, slot


async def _call(client: httpx.AsyncClient, method: str, path: str, body: Any = None) -> Any:
    try:
        response = await client.request(method, path, json=body)
    except httpx.HTTPError as exc:
        raise ConnectUnreachable(
            f"Kafka Connect at {client.base_url} cannot be reached: {exc}"
        ) from None
    if response.status_code == 404 and method == "GET":
        return None
    if response.status_code >= 400:
        raise ConnectError(f"{method} {path}: HTTP {response.status_code}: {response.text[:2000]}")
    return response.json() if response.content else None


async def _reset_offsets(
    client: httpx.AsyncClient, name: str, started: float, timeout_s: float
) -> None:
    """Wait for the connector to be STOPPED, delete its offsets, resume it."""
    while True:
        status = await connector_state(client, name)
        if status and status["connector"]["state"] == "STOPPED":
            break
        if time.monotonic() - started > timeout_s:
            raise ConnectError(f"connector {name} did not stop within {timeout_s:.0f} s: {status}")
        await asyncio.sleep(0.2)
    await _call(client, "DELETE", f"/connectors/{name}/offsets")
    await _call(client, "PUT", f"/connectors/{name}/resume")


async def connector_state(client: httpx.AsyncClient, name: str) -> dict[str, Any] | None:
    status = await _call(client, "GET", f"/connectors/{name}/status")
    return status if isinstance(status, dict) else None


async def register(
    engine: AsyncEngine,
    connect_url: str,
    names: DebeziumNames,
    config: dict[str, str],
    timeout_s: float = 60.0,
) -> Registration:
    started = time.monotonic()
    await check_reachable(connect_url)  # before the slot: none left behind for nobody
    publication, slot = await ensure_publication_and_slot(engine, names)
    async with httpx.AsyncClient(base_url=connect_url.rstrip("/"), timeout=30) as client:
        existing = await connector_state(client, names.connector)
        if existing is None:
            # Created stopped, its stored offsets (of an earlier connector of this name,
            # pointing into a slot that is gone) cleared, then started: it reads the slot
            # from its start instead of failing on an LSN the server no longer has.
            body = {"name": names.connector, "config": config, "initial_state": "STOPPED"}
            await _call(client, "POST", "/connectors", body)
            await _reset_offsets(client, names.connector, started, timeout_s)
        else:
            await _call(client, "PUT", f"/connectors/{names.connector}/config", config)
            if slot:
                # A new slot under a connector that exists: its offsets are of the old slot.
                await _call(client, "PUT", f"/connectors/{names.connector}/stop")
                await _reset_offsets(client, names.connector, started, timeout_s)
        while True:
            status = await connector_state(client, names.connector)
            if status:
                tasks = status.get("tasks", [])
                states = [status["connector"]["state"], *(t["state"] for t in tasks)]
                failed = [t for t in [status["connector"], *tasks] if t["state"] == "FAILED"]
                if failed:
                    trace = str(failed[0].get("trace", ""))[:3000]
                    raise ConnectError(f"connector {names.connector} FAILED: {trace}")
                if tasks and set(states) == {"RUNNING"}:
                    return Registration(publication, slot, time.monotonic() - started)
            if time.monotonic() - started > timeout_s:
                raise ConnectError(
                    f"connector {names.connector} not running after {timeout_s:.0f} s: {status}"
                )
            await asyncio.sleep(0.5)


async def unregister(connect_url: str, name: str) -> bool:
    """Delete the connector (its slot stays: store/slots.drop_slot); False if it was not there."""
    async with httpx.AsyncClient(base_url=connect_url.rstrip("/"), timeout=30) as client:
        try:
            response = await client.delete(f"/connectors/{name}")
        except httpx.HTTPError as exc:
            raise ConnectUnreachable(
                f"Kafka Connect at {client.base_url} cannot be reached: {exc}"
            ) from None
        if response.status_code == 404:
            return False
        if response.status_code >= 400:
            raise ConnectError(
                f"DELETE /connectors/{name}: HTTP {response.status_code}: {response.text[:2000]}"
            )
        return True
