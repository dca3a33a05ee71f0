"""`debezium-config --register` run by a database role that lacks what logical replication
needs (real PostgreSQL, the real Kafka Connect at TEST_CONNECT_URL): a role without the
REPLICATION attribute, and a role that does not own the capture table. Each exits 2 naming
the missing privilege and the statement that grants it, and leaves no slot, no publication
and no connector behind (a half-made setup would hold WAL or confuse the next attempt)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from outbox_engine.store import slots
from outbox_engine.store.capture import CAPTURE_TABLE

from ..debezium_ops_support import Relays, connect, relays

__all__ = ["connect", "relays"]  # the fixtures
# Slots need PostgreSQL with wal_level=logical, --register a Kafka Connect with Debezium.
pytestmark = pytest.mark.connect
PASSWORD = "role-test-password"


@pytest.fixture
async def role(relays: Relays) -> AsyncIterator[str]:
    """A login role of this test alone, NOREPLICATION, with CREATE on the test database (so
    only the privileges under test are missing); dropped with what it was granted."""
    name = f"norepl_{uuid.uuid4().hex[:10]}"
    engine = relays.container.engine()
    database = make_url(relays.container.settings().database_url).database
    async with engine.begin() as conn:
        await conn.execute(
            text(f"CREATE ROLE {name} LOGIN NOREPLICATION NOSUPERUSER PASSWORD '{PASSWORD}'")
        )
        await conn.execute(text(f'GRANT CREATE ON DATABASE "{database}" TO {name}'))
    try:
        yield name
    finally:
        async with engine.begin() as conn:
            await conn.execute(text(f"DROP OWNED BY {name}"))
            await conn.execute(text(f"DROP ROLE {name}"))


def _as(relays: Relays, role: str) -> str:
    url = make_url(relays.container.settings().database_url)
    return url.set(username=role, password=PASSWORD).render_as_string(hide_password=False)


async def _register_as(relays: Relays, role: str, connect: str) -> Any:
    """`debezium-config --register` with the service's DATABASE_URL logging in as `role`."""
    return await asyncio.to_thread(
        relays.cli,
        "debezium-config",
        "--register",
        "--connect-url",
        connect,
        DATABASE_URL=_as(relays, role),
    )


async def _left_behind(relays: Relays, connect: str) -> tuple[bool, bool, int]:
    """(slot exists, publication exists, HTTP status of the connector on Connect)."""
    async with relays.container.engine().connect() as conn:
        slot = (await slots.slot_state(conn, relays.names.slot)).exists
        publication = (
            await conn.execute(
                text("SELECT count(*) FROM pg_publication WHERE pubname = :name"),
                {"name": relays.names.publication},
            )
        ).scalar_one()
    async with httpx.AsyncClient(base_url=connect, timeout=10) as client:
        connector = (await client.get(f"/connectors/{relays.names.connector}")).status_code
    return slot, bool(publication), connector


async def test_a_role_without_replication_is_told_to_get_it(
    relays: Relays, role: str, connect: str
) -> None:
    # The publication is there (made by the migrations' owner), so the slot is what fails.
    async with relays.container.engine().begin() as conn:
        await slots.ensure_publication(conn, relays.names.publication)
    result = await _register_as(relays, role, connect)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert (
        f"cannot create replication slot {relays.names.slot}: the database user needs the "
        "REPLICATION attribute (ALTER ROLE ... WITH REPLICATION)"
    ) in result.stderr
    assert result.stdout == ""
    assert await _left_behind(relays, connect) == (False, True, 404)


async def test_a_role_that_does_not_own_the_capture_table_is_told_who_does(
    relays: Relays, role: str, connect: str
) -> None:
    result = await _register_as(relays, role, connect)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert (
        f"cannot create publication {relays.names.publication}: the registering role must own "
        f"{CAPTURE_TABLE} (the role that ran the migrations does)"
    ) in result.stderr
    assert await _left_behind(relays, connect) == (False, False, 404)
