"""The Debezium relay's tables and statements: what Debezium reads instead of the item table.

Debezium's outbox router maps table columns to a Kafka message; the item table keeps the
worker's headers in one JSON column, and its `created_at` is a timestamp that Debezium would
render differently from the worker. So a box relayed by Debezium gets a BEFORE INSERT trigger
(`outbox_capture`, function `outbox_capture_item(box, topic)`) that writes each new item as
exactly the message the worker would send into `outbox_capture` (one column per header, the
`created-at` text as Python's `isoformat()` writes it) and marks the item row DELIVERED:
the worker never sees it pending, and retention deletes it like any delivered row.

Only `outbox_capture` is in the service's publication, which publishes inserts only (its
heartbeats are capture rows too: `beat`): a capture row reaches Debezium from the WAL (its
replication slot keeps the WAL until Debezium confirms it), so the row itself may be
deleted soon after commit (`purge_captured`), and those deletes are never sent.

Switching a box (debezium/switch.py) runs under `LOCK TABLE ... IN SHARE ROW EXCLUSIVE
MODE`: no item of the box commits between copying its pending rows and adding or dropping
the trigger, which is what keeps per-key order across a switch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Identity,
    Index,
    LargeBinary,
    Table,
    Text,
    func,
    text,
)
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from outbox_engine.store.metadata import ENGINE_METADATA
from outbox_engine.store.status import ItemStatus

CAPTURE_TABLE = "outbox_capture"
# Heartbeats are capture rows of this pseudo box, sent to the service's heartbeat topic:
# Kafka Connect commits a source offset only for a record it wrote to Kafka (not for one a
# transform dropped), and Debezium confirms WAL to the slot only at such commits.
HEARTBEAT_BOX = "__heartbeat"
TRIGGER = "outbox_capture"
FUNCTION = "outbox_capture_item"

# The headers the worker takes from an item's JSON headers, in the order it sends them
# (PostgreSQL's jsonb orders keys by length, then bytes), and their capture columns.
HEADER_COLUMNS: tuple[tuple[str, str], ...] = (
    ("hop", "hop"),
    ("tracestate", "tracestate"),
    ("traceparent", "traceparent"),
    ("causation-id", "causation_id"),
    ("correlation-id", "correlation_id"),
)

capture_table = Table(
    CAPTURE_TABLE,
    ENGINE_METADATA,
    Column("id", BigInteger, Identity(always=False), primary_key=True),
    Column("box", Text, nullable=False),
    Column("item_id", BigInteger, nullable=False),
    Column("message_id", Text, nullable=False),
    Column("topic", Text, nullable=False),
    Column("event_key", Text, nullable=False),
    Column("event_name", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    *(Column(column, Text, nullable=True) for _, column in HEADER_COLUMNS),
    Column("payload", LargeBinary, nullable=False),
    Column("captured_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
Index("ix_outbox_capture_captured_at", capture_table.c.captured_at, postgresql_using="brin")

_HEADER_INSERT_COLUMNS = ", ".join(column for _, column in HEADER_COLUMNS)
_INSERT_COLUMNS = (
    "box, item_id, message_id, topic, event_key, event_name, created_at, "
    f"{_HEADER_INSERT_COLUMNS}, payload"
)


def _header_values(row: str) -> str:
    return ", ".join(f"{row}.headers ->> '{name}'" for name, _ in HEADER_COLUMNS)


# `outbox_iso_time` renders a timestamptz as Python's datetime.isoformat() does for the
# UTC datetimes the worker reads: microseconds only when not zero, offset `+00:00`.
CAPTURE_FUNCTIONS_SQL = (
    """
CREATE OR REPLACE FUNCTION outbox_iso_time(t timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
    || CASE WHEN extract(microseconds FROM t)::bigint % 1000000 = 0 THEN ''
            ELSE to_char(t AT TIME ZONE 'UTC', '.US') END
    || '+00:00'
$$""",
    f"""
CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO {CAPTURE_TABLE} ({_INSERT_COLUMNS})
  VALUES (TG_ARGV[0], NEW.id, NEW.uuid::text, TG_ARGV[1], NEW.event_key, NEW.event_name,
          outbox_iso_time(NEW.created_at), {_header_values("NEW")}, NEW.payload);
  NEW.status := {int(ItemStatus.DELIVERED)};
  NEW.processed_at := NEW.created_at;
  RETURN NEW;
END
$$""",
)
DROP_FUNCTIONS_SQL = (
    f"DROP FUNCTION IF EXISTS {FUNCTION}() CASCADE",
    "DROP FUNCTION IF EXISTS outbox_iso_time(timestamptz)",
)

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def _identifier(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"{name!r} is not a plain lower-case SQL name")
    return name


def _literal(value: str, pattern: re.Pattern[str], what: str) -> str:
    if not pattern.match(value):
        raise ValueError(f"{what} {value!r} does not match {pattern.pattern}")
    return f"'{value}'"


async def lock_items(conn: AsyncConnection, table: str) -> None:
    """Wait for the box's in-flight inserts to commit and hold new ones until this
    transaction ends (reads go on)."""
    await conn.execute(text(f"LOCK TABLE {_identifier(table)} IN SHARE ROW EXCLUSIVE MODE"))


async def install_capture(conn: AsyncConnection, table: str, box: str, topic: str) -> None:
    await conn.execute(
        text(
            f"CREATE OR REPLACE TRIGGER {TRIGGER} BEFORE INSERT ON {_identifier(table)} "
            f"FOR EACH ROW EXECUTE FUNCTION {FUNCTION}("
            f"{_literal(box, _NAME, 'box name')}, {_literal(topic, _TOPIC, 'topic')})"
        )
    )


async def drop_capture(conn: AsyncConnection, table: str) -> None:
    await conn.execute(text(f"DROP TRIGGER IF EXISTS {TRIGGER} ON {_identifier(table)}"))


async def capture_installed(conn: AsyncConnection, table: str) -> str | None:
    """The topic the box's trigger captures to, or None when it has no trigger."""
    row = (
        await conn.execute(
            text(
                "SELECT t.tgargs FROM pg_trigger t WHERE t.tgrelid = to_regclass(:table) "
                "AND t.tgname = :trigger AND NOT t.tgisinternal"
            ),
            {"table": _identifier(table), "trigger": TRIGGER},
        )
    ).first()
    if row is None:
        return None
    args = bytes(row[0]).split(b"\x00")
    return args[1].decode() if len(args) > 1 else ""


async def holding_rows(conn: AsyncConnection, table: str) -> tuple[int, int]:
    """(failed for good, pending in backoff): the rows that hold their key in a strict box."""
    row = (
        await conn.execute(
            text(
                f"SELECT count(*) FILTER (WHERE status = {int(ItemStatus.FAILED)}), "
                f"count(*) FILTER (WHERE status = {int(ItemStatus.PENDING)} "
                f"AND next_attempt_at IS NOT NULL) FROM {_identifier(table)} "
                f"WHERE status IN ({int(ItemStatus.FAILED)}, {int(ItemStatus.PENDING)})"
            )
        )
    ).one()
    return int(row[0]), int(row[1])


def _copy_rows(table: str, where: str) -> str:
    return (
        f"INSERT INTO {CAPTURE_TABLE} ({_INSERT_COLUMNS}) "
        f"SELECT :box, i.id, i.uuid::text, :topic, i.event_key, i.event_name, "
        f"outbox_iso_time(i.created_at), {_header_values('i')}, i.payload "
        f"FROM {_identifier(table)} i WHERE {where} ORDER BY i.id"
    )


async def capture_pending(conn: AsyncConnection, table: str, box: str, topic: str) -> int:
    """Copy every PENDING item of the box into the capture table in id order and mark them
    DELIVERED; the number copied. Run under `lock_items`."""
    pending = f"i.status = {int(ItemStatus.PENDING)}"
    copied = await conn.execute(text(_copy_rows(table, pending)), {"box": box, "topic": topic})
    await conn.execute(
        text(
            f"UPDATE {_identifier(table)} SET status = {int(ItemStatus.DELIVERED)}, "
            f"processed_at = now(), next_attempt_at = NULL "
            f"WHERE status = {int(ItemStatus.PENDING)}"
        )
    )
    return int(copied.rowcount or 0)


async def recapture(
    conn: AsyncConnection, table: str, box: str, topic: str, ids: Sequence[int]
) -> int:
    """Capture the named items again, in id order (a replay of a Debezium box)."""
    if not ids:
        return 0
    result = await conn.execute(
        text(_copy_rows(table, "i.id = ANY(:ids)")),
        {"box": box, "topic": topic, "ids": list(ids)},
    )
    return int(result.rowcount or 0)


async def current_lsn(conn: AsyncConnection) -> str:
    return str((await conn.execute(text("SELECT pg_current_wal_lsn()::text"))).scalar_one())


def heartbeat_sql(topic: str) -> str:
    """One heartbeat: a capture row to `topic` (the connector's heartbeat query too)."""
    return (
        f"INSERT INTO {CAPTURE_TABLE} (box, item_id, message_id, topic, event_key, event_name, "
        f"created_at, payload) VALUES ('{HEARTBEAT_BOX}', 0, gen_random_uuid()::text, "
        f"{_literal(topic, _TOPIC, 'topic')}, 'heartbeat', 'heartbeat', "
        "outbox_iso_time(now()), ''::bytea)"
    )


async def beat(conn: AsyncConnection, topic: str) -> None:
    """A heartbeat row: a captured change after everything committed so far."""
    await conn.execute(text(heartbeat_sql(topic)))


async def purge_captured(engine: AsyncEngine, older_than_seconds: float, batch: int = 5000) -> int:
    """Delete capture rows (heartbeats included) captured more than `older_than_seconds`
    ago, in batches; the number deleted. Deletes are not published: Debezium never sees
    them, and it reads what it sends from the WAL, not from the table."""
    deleted = 0
    while True:
        async with engine.begin() as conn:
            result = await conn.execute(
                text(
                    f"DELETE FROM {CAPTURE_TABLE} WHERE id IN (SELECT id FROM {CAPTURE_TABLE} "
                    "WHERE captured_at < now() - make_interval(secs => :age) "
                    "ORDER BY id LIMIT :batch)"
                ),
                {"age": older_than_seconds, "batch": batch},
            )
            count = int(result.rowcount or 0)
        deleted += count
        if count < batch:
            return deleted
