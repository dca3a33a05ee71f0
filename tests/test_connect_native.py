"""The native Debezium path: scripts/connect.sh starts Kafka Connect with the Debezium
PostgreSQL connector, and an outbox table relayed by it reaches Kafka byte for byte.

What is promised and checked here, on real PostgreSQL (wal_level=logical), Kafka and Connect:

* `connect.sh up` starts (or reuses) a distributed worker whose plugin list has the
  PostgreSQL connector, the Outbox Event Router and the byte-array converter; a second
  `up` reuses it in well under a few seconds;
* a connector with `pgoutput`, a publication and a slot of its own, the router,
  `binary.handling.mode=bytes` and the ByteArrayConverter turns 1,000 inserted outbox rows
  into exactly 1,000 messages: key = event_key, value = the exact payload bytes, the mapped
  columns as the only headers (message-id, event-name, correlation-id, hop: the router's own
  `id` header and Debezium's context headers removed), on the topic named by the row, in
  per-key insertion order;
* cleanup always runs: the connector is deleted and its slot, publication, database and
  topic dropped (a slot left behind would retain WAL forever).

Env: TEST_CONNECT_DATABASE_URL (a PostgreSQL with wal_level=logical; default
TEST_DATABASE_URL, which scripts/postgres.sh configures so), TEST_KAFKA_BOOTSTRAP_SERVERS.
Select with `-m connect`, leave out with `-m "not connect"`.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import asyncpg
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import SERVICES_HOW_TO, note
from connect_support import (
    BYTE_ARRAY_CONVERTER,
    EVENT_ROUTER,
    POSTGRES_CONNECTOR,
    Connect,
    admin,
    connect_up,
    consume,
    delete_connector,
    drop_slot,
    http,
    wait_running,
)

pytestmark = [pytest.mark.services, pytest.mark.connect]

ROWS = 1_000
KEYS = 40
TRANSACTIONS = 10

OUTBOX_TABLE = """
CREATE TABLE outbox_events (
    id uuid PRIMARY KEY,
    event_key text NOT NULL,
    topic text NOT NULL,
    event_name text NOT NULL,
    correlation_id text NOT NULL,
    hop integer NOT NULL,
    payload bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
)"""


def database_url() -> str:
    url = os.environ.get("TEST_CONNECT_DATABASE_URL") or os.environ.get("TEST_DATABASE_URL")
    if not url or not os.environ.get("TEST_KAFKA_BOOTSTRAP_SERVERS"):
        pytest.fail(SERVICES_HOW_TO, pytrace=False)
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


def with_database(url: str, name: str) -> str:
    return f"{url.rpartition('/')[0]}/{name}"


@pytest.fixture(scope="module")
def connect() -> Connect:
    kafka = os.environ.get("TEST_KAFKA_BOOTSTRAP_SERVERS", "")
    database_url()  # fail early, with the how-to, when the services are not set
    url, elapsed, _ = connect_up(kafka)
    note(f"connect.sh up (first in this session): {elapsed:.1f}s -> {url}")
    return Connect(url, kafka)


def test_connect_lists_debezium_and_second_up_is_fast(connect: Connect) -> None:
    plugins = http("GET", f"{connect.url}/connector-plugins?connectorsOnly=false")
    listed = {(plugin["class"], plugin["type"]) for plugin in plugins}
    for wanted in [
        (POSTGRES_CONNECTOR, "source"),
        (EVENT_ROUTER, "transformation"),
        (BYTE_ARRAY_CONVERTER, "converter"),
    ]:
        assert wanted in listed, sorted(listed)

    url, elapsed, output = connect_up(connect.kafka)
    note(f"connect.sh up (worker already running): {elapsed:.2f}s")
    assert url == connect.url
    assert "reusing running worker" in output, output
    assert elapsed < 5, f"a second connect.sh up took {elapsed:.1f}s"


# --------------------------------------------------------------------------------------
# The outbox relayed by Debezium.


@dataclass(frozen=True)
class Row:
    id: uuid.UUID
    key: str
    seq: int
    payload: bytes


def make_rows() -> list[Row]:
    rng = random.Random(19)
    rows: list[Row] = []
    for n in range(ROWS):
        key = f"key-{n % KEYS:02d}"
        # Every byte value, zero bytes and lengths from 1 to 3000: text decoding anywhere
        # on the way (a JSON or string converter) would change them.
        payload = bytes([0, 255]) + rng.randbytes(rng.randrange(0, 2998))
        rows.append(Row(uuid.UUID(int=rng.getrandbits(128), version=4), key, n // KEYS, payload))
    assert len({row.payload for row in rows}) == ROWS
    return rows


async def insert_rows(url: str, topic: str, rows: list[Row]) -> None:
    conn = await asyncpg.connect(url)
    try:
        size = len(rows) // TRANSACTIONS
        for start in range(0, len(rows), size):
            async with conn.transaction():
                await conn.executemany(
                    "INSERT INTO outbox_events (id, event_key, topic, event_name, correlation_id,"
                    " hop, payload) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    [
                        (r.id, r.key, topic, f"event_{r.seq}", f"corr-{r.key}", r.seq, r.payload)
                        for r in rows[start : start + size]
                    ],
                )
    finally:
        await conn.close()


def connector_config(name: str, db_url: str, slot: str, publication: str) -> dict[str, str]:
    parts = urlsplit(db_url)
    return {
        "connector.class": POSTGRES_CONNECTOR,
        "tasks.max": "1",
        "plugin.name": "pgoutput",
        "database.hostname": parts.hostname or "127.0.0.1",
        "database.port": str(parts.port or 5432),
        "database.user": unquote(parts.username or ""),
        "database.password": unquote(parts.password or ""),
        "database.dbname": parts.path.lstrip("/"),
        "topic.prefix": name,
        "slot.name": slot,
        "publication.name": publication,
        "publication.autocreate.mode": "disabled",
        "table.include.list": "public.outbox_events",
        "snapshot.mode": "no_data",
        "tombstones.on.delete": "false",
        "binary.handling.mode": "bytes",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": BYTE_ARRAY_CONVERTER,
        # Debezium 3 adds __debezium.context.* headers unless told not to.
        "extended.headers.enabled": "false",
        "transforms": "outbox,dropid",
        "transforms.outbox.type": EVENT_ROUTER,
        "transforms.outbox.table.field.event.id": "id",
        "transforms.outbox.table.field.event.key": "event_key",
        "transforms.outbox.table.field.event.payload": "payload",
        "transforms.outbox.route.by.field": "topic",
        "transforms.outbox.route.topic.replacement": "${routedByValue}",
        "transforms.outbox.table.fields.additional.placement": (
            "id:header:message-id,event_name:header:event-name,"
            "correlation_id:header:correlation-id,hop:header:hop"
        ),
        # The router always adds the event id as header `id`; the worker calls it message-id.
        "transforms.dropid.type": "org.apache.kafka.connect.transforms.DropHeaders",
        "transforms.dropid.headers": "id",
    }


@pytest.fixture
def scratch(connect: Connect) -> Iterator[tuple[str, str]]:
    """A database of its own with the outbox table and a publication: (url, run id)."""
    base = database_url()
    run_id = f"connect_native_{uuid.uuid4().hex[:10]}"
    (rows,) = asyncio.run(admin(base, "SELECT current_setting('wal_level') AS level"))
    if rows[0]["level"] != "logical":
        pytest.fail(
            f"{base.rpartition('@')[2]} runs with wal_level={rows[0]['level']}: Debezium needs "
            "logical. scripts/postgres.sh up configures and restarts its cluster for it; for "
            "another server set TEST_CONNECT_DATABASE_URL to one with wal_level=logical",
            pytrace=False,
        )
    asyncio.run(admin(base, f"CREATE DATABASE {run_id}"))
    db_url = with_database(base, run_id)
    try:
        asyncio.run(
            admin(db_url, OUTBOX_TABLE, f"CREATE PUBLICATION {run_id} FOR TABLE outbox_events")
        )
        yield db_url, run_id
    finally:
        asyncio.run(admin(base, f"DROP DATABASE IF EXISTS {run_id} WITH (FORCE)"))


def test_debezium_relays_an_outbox_table_byte_for_byte(
    connect: Connect, scratch: tuple[str, str]
) -> None:
    db_url, name = scratch
    topic, slot = name.replace("_", "-"), name
    rows = make_rows()
    kafka_admin = AdminClient({"bootstrap.servers": connect.kafka})
    kafka_admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[
        topic
    ].result(timeout=30)
    try:
        started = time.monotonic()
        http(
            "PUT",
            f"{connect.url}/connectors/{name}/config",
            connector_config(name, db_url, slot, name),
        )
        wait_running(connect, name, db_url, slot)
        registered = time.monotonic()
        asyncio.run(insert_rows(db_url, topic, rows))
        committed = time.monotonic()
        messages, drained = consume(connect.kafka, topic, ROWS)
        status = http("GET", f"{connect.url}/connectors/{name}/status")
        note(
            f"debezium: registered and running in {registered - started:.1f}s, {ROWS} rows "
            f"committed in {committed - registered:.1f}s, the last on the topic "
            f"{drained - committed:.1f}s after the first commit"
        )
    finally:
        # Connector first (it holds the slot), then the slot: a slot left behind would
        # retain WAL forever. Each step runs even if an earlier one failed.
        try:
            delete_connector(connect, name)
        finally:
            try:
                asyncio.run(drop_slot(db_url, slot))
            finally:
                asyncio.run(admin(db_url, f"DROP PUBLICATION IF EXISTS {name}"))
                kafka_admin.delete_topics([topic])[topic].result(timeout=30)

    by_id = {str(row.id): row for row in rows}
    assert len(messages) == ROWS, (
        f"{len(messages)} messages for {ROWS} rows; connector status: "
        + json.dumps(status, indent=1)[:3000]
    )
    seen: dict[str, list[int]] = {}
    ids: set[str] = set()
    for message in messages:
        headers = message.headers() or []
        row = by_id[dict(headers)["message-id"].decode()]
        assert message.key() == row.key.encode()
        assert message.value() == row.payload, f"payload of {row.id} changed"
        # Exactly these headers, in this order, with the worker's text encodings.
        assert headers == [
            ("message-id", str(row.id).encode()),
            ("event-name", f"event_{row.seq}".encode()),
            ("correlation-id", f"corr-{row.key}".encode()),
            ("hop", str(row.seq).encode()),
        ]
        ids.add(str(row.id))
        seen.setdefault(row.key, []).append(row.seq)
    assert len(ids) == ROWS, f"{ROWS - len(ids)} rows missing, as many duplicates"
    # Per key, the messages arrive in insertion order (seq 0, 1, 2, ...): none out of order.
    per_key = ROWS // KEYS
    assert seen == {f"key-{k:02d}": list(range(per_key)) for k in range(KEYS)}
