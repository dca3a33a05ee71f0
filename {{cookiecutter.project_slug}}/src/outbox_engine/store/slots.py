"""Logical replication for the Debezium relay: the service's publication and slot, and what
PostgreSQL says about them.

The slot is created here, before the connector first starts, and not by Debezium: a box can
only be switched to Debezium once the slot exists, so every capture row committed from then
on is in WAL the slot holds, whatever Connect is doing. The publication carries only the
capture table, inserts only.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from outbox_engine.store.capture import CAPTURE_TABLE, heartbeat_sql

PLUGIN = "pgoutput"


class ReplicationSetupError(RuntimeError):
    """PostgreSQL cannot serve logical replication to the connector as configured."""


@dataclass(frozen=True)
class SlotState:
    exists: bool
    active: bool = False
    plugin: str | None = None
    confirmed_flush_lsn: str | None = None
    # WAL the slot holds back: the server's current position minus what Debezium confirmed.
    lag_bytes: int | None = None
    # PostgreSQL's wal_status: reserved / extended / unreserved / lost.
    wal_status: str | None = None


async def wal_level(conn: AsyncConnection) -> str:
    return str((await conn.execute(text("SELECT current_setting('wal_level')"))).scalar_one())


async def ensure_publication(conn: AsyncConnection, publication: str) -> bool:
    """Create the publication of the capture tables if missing; True when created. An existing
    one must publish both tables and inserts: anything else is refused, not changed."""
    row = (
        await conn.execute(
            text("SELECT pubinsert FROM pg_publication WHERE pubname = :name"),
            {"name": publication},
        )
    ).first()
    if row is None:
        try:
            await conn.execute(
                text(
                    f'CREATE PUBLICATION "{publication}" FOR TABLE {CAPTURE_TABLE} '
                    "WITH (publish = 'insert')"
                )
            )
        except Exception as exc:
            if "must be owner" in str(exc) or "permission denied" in str(exc):
                raise ReplicationSetupError(
                    f"cannot create publication {publication}: the registering role must own "
                    f"{CAPTURE_TABLE} (the role that ran the migrations does)"
                ) from exc
            raise
        return True
    tables = {
        str(name)
        for name in (
            await conn.execute(
                text("SELECT tablename FROM pg_publication_tables WHERE pubname = :name"),
                {"name": publication},
            )
        ).scalars()
    }
    missing = {CAPTURE_TABLE} - tables
    if missing or not row[0]:
        raise ReplicationSetupError(
            f"publication {publication} exists but does not publish inserts of "
            f"{', '.join(sorted(missing)) or 'its tables'}: drop it (DROP PUBLICATION "
            f"{publication}) and register again"
        )
    return False


async def slot_state(conn: AsyncConnection, slot: str) -> SlotState:
    row = (
        await conn.execute(
            text(
                "SELECT active, plugin, confirmed_flush_lsn::text, "
                "pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint, wal_status "
                "FROM pg_replication_slots WHERE slot_name = :slot"
            ),
            {"slot": slot},
        )
    ).first()
    if row is None:
        return SlotState(exists=False)
    return SlotState(
        True,
        bool(row[0]),
        row[1],
        row[2],
        None if row[3] is None else int(row[3]),
        row[4],
    )


async def ensure_slot(engine: AsyncEngine, slot: str) -> bool:
    """Create the logical slot (pgoutput) if missing; True when created."""
    async with engine.connect() as conn:
        level = await wal_level(conn)
        if level != "logical":
            raise ReplicationSetupError(
                f"PostgreSQL runs with wal_level={level}; Debezium needs wal_level=logical "
                "(set it in postgresql.conf or with -c wal_level=logical, then restart)"
            )
        state = await slot_state(conn, slot)
    if state.exists:
        if state.plugin != PLUGIN:
            raise ReplicationSetupError(
                f"replication slot {slot} exists with plugin {state.plugin}, not {PLUGIN}"
            )
        return False
    # Creating a logical slot waits for running transactions; not inside one of ours.
    async with engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        try:
            await conn.execute(
                text("SELECT pg_create_logical_replication_slot(:slot, :plugin)"),
                {"slot": slot, "plugin": PLUGIN},
            )
        except Exception as exc:
            if "permission denied" in str(exc) or "must be superuser" in str(exc):
                raise ReplicationSetupError(
                    f"cannot create replication slot {slot}: the database user needs the "
                    "REPLICATION attribute (ALTER ROLE ... WITH REPLICATION)"
                ) from exc
            raise
    return True


async def drop_slot(engine: AsyncEngine, slot: str, timeout_s: float = 20.0) -> bool:
    """Drop the slot (its WAL sender is terminated first); True when it existed. Dropping
    the slot of a box still relayed by Debezium loses what it had not yet sent."""
    deadline = time.monotonic() + timeout_s
    async with engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        while True:
            state = await slot_state(conn, slot)
            if not state.exists:
                return False
            if state.active:
                await conn.execute(
                    text(
                        "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
                        "WHERE slot_name = :slot AND active_pid IS NOT NULL"
                    ),
                    {"slot": slot},
                )
            else:
                try:
                    await conn.execute(
                        text("SELECT pg_drop_replication_slot(:slot)"), {"slot": slot}
                    )
                    return True
                except Exception:
                    if time.monotonic() > deadline:
                        raise
            if time.monotonic() > deadline:
                raise ReplicationSetupError(
                    f"replication slot {slot} stays active: drop it by hand"
                )
            await asyncio.sleep(0.2)


async def wait_confirmed(
    engine: AsyncEngine,
    slot: str,
    lsn: str,
    heartbeat_topic: str,
    timeout_s: float,
    poll_s: float = 0.5,
) -> float:
    """Wait until the slot's confirmed_flush_lsn reaches `lsn`: the connector has had
    everything committed before it acknowledged by Kafka. Seconds waited; TimeoutError after
    `timeout_s`.

    Debezium confirms the commit position of the last transaction before the newest event
    whose offset Kafka Connect committed; so a transaction committed after `lsn` is only
    confirmed once a later one has been read. Each poll therefore writes a heartbeat (a
    capture row to the heartbeat topic) to give it that later transaction."""
    started = time.monotonic()
    async with engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        while True:
            done = (
                await conn.execute(
                    text(
                        "SELECT confirmed_flush_lsn >= CAST(CAST(:lsn AS text) AS pg_lsn) "
                        "FROM pg_replication_slots WHERE slot_name = :slot"
                    ),
                    {"slot": slot, "lsn": lsn},
                )
            ).scalar_one_or_none()
            if done is None:
                raise ReplicationSetupError(f"replication slot {slot} does not exist")
            if done:
                return time.monotonic() - started
            if time.monotonic() - started > timeout_s:
                raise TimeoutError(
                    f"slot {slot} has not confirmed WAL position {lsn} within {timeout_s:.0f} s"
                )
            await conn.execute(text(heartbeat_sql(heartbeat_topic)))
            await asyncio.sleep(poll_s)
