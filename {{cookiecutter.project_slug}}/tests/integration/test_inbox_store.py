"""The inbox's batch insert (store/inbox.py) against the real table: what it stores, how it
judges the rows it does not store, and values at the edges of what the JSON path carries.

The insert judges every row it did not store against the stored one in the same statement:
a clash (same id, other payload) is reported, a redelivery is not, and a row whose stored
twin was committed by another transaction after the statement began is left "unjudged" for
a check of its own. These tests try to make it wrong: duplicates inside one batch, rows
stored as rejected, a concurrent writer, batches split over several statements, and values
at the limits of their types.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.inbox.consumer import REJECTED_HEADER
from outbox_engine.store import inbox as store_inbox
from outbox_engine.store.inbox import InboxStatements, encode
from outbox_engine.store.pgconn import DriverConnections, is_data_error

from ..support import INBOX_BOX, make_registry

TIMEOUT = 30.0


def _row(message_id: uuid.UUID | str, payload: bytes, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "uuid": str(message_id),
        "event_name": "payment_received",
        "event_key": "key-1",
        "bucket": 3,
        "payload": payload,
        "headers": {"message-id": str(message_id)},
        "source_topic": "payments",
        "source_partition": 0,
        "source_offset": 7,
    }
    row.update(changes)
    return row


@pytest.fixture
async def connections(container: Container) -> AsyncIterator[DriverConnections]:
    connections = DriverConnections(container.engine())
    yield connections
    await connections.close()


@pytest.fixture
def statements() -> InboxStatements:
    box = make_registry().get(INBOX_BOX)
    return InboxStatements(box.table_name, box.channel, REJECTED_HEADER)


def _table() -> str:
    return make_registry().get(INBOX_BOX).table_name


async def _stored(connections: DriverConnections) -> list[Any]:
    async with connections.acquire() as conn:
        return list(
            await conn.fetch(
                f"SELECT uuid, payload, headers, event_key, event_name, bucket, "
                f"source_topic, source_partition, source_offset FROM {_table()} ORDER BY id"
            )
        )


async def test_duplicates_inside_one_batch_keep_the_first_and_only_another_payload_clashes(
    connections: DriverConnections, statements: InboxStatements
) -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    rows = [_row(a, b"one"), _row(b, b"b"), _row(a, b"two"), _row(a, b"one"), _row(b, b"b")]
    async with connections.acquire() as conn:
        result = await statements.insert(conn, rows, TIMEOUT)
    assert (result.new, result.clashes, result.unjudged) == (2, [2], [])
    stored = await _stored(connections)
    assert [(r["uuid"], bytes(r["payload"])) for r in stored] == [(a, b"one"), (b, b"b")]


async def test_a_stored_id_coming_back_with_another_payload_is_a_clash(
    connections: DriverConnections, statements: InboxStatements
) -> None:
    a, c = uuid.uuid4(), uuid.uuid4()
    async with connections.acquire() as conn:
        first = await statements.insert(conn, [_row(a, b"original")], TIMEOUT)
        again = await statements.insert(
            conn, [_row(a, b"replaced"), _row(c, b"c"), _row(a, b"original")], TIMEOUT
        )
    assert (first.new, first.clashes, first.unjudged) == (1, [], [])
    assert (again.new, again.clashes, again.unjudged) == (1, [0], [])
    assert len(await _stored(connections)) == 2


async def test_rows_stored_or_received_as_rejected_are_never_compared(
    connections: DriverConnections, statements: InboxStatements
) -> None:
    stored_rejected, received_rejected = uuid.uuid4(), uuid.uuid4()
    rejected = {REJECTED_HEADER: "message has no value"}
    async with connections.acquire() as conn:
        await statements.insert(
            conn,
            [_row(stored_rejected, b"", headers=rejected), _row(received_rejected, b"kept")],
            TIMEOUT,
        )
        result = await statements.insert(
            conn,
            [
                _row(stored_rejected, b"now with a value"),
                _row(received_rejected, b"", headers=rejected),
            ],
            TIMEOUT,
        )
    assert (result.new, result.clashes, result.unjudged) == (0, [], [])


async def test_an_id_committed_by_another_writer_meanwhile_is_left_unjudged_then_found(
    connections: DriverConnections, statements: InboxStatements
) -> None:
    """Another consumer (a rebalance) stores the id first and commits while our statement
    waits on its conflict: our statement cannot see that row, so it must not call the row a
    redelivery; the separate check, a statement of its own, sees it and finds the clash."""
    x = uuid.uuid4()
    async with connections.acquire() as first, connections.acquire() as second:
        transaction = first.transaction()
        await transaction.start()
        await statements.insert(first, [_row(x, b"theirs")], TIMEOUT)
        ours = asyncio.ensure_future(statements.insert(second, [_row(x, b"ours")], TIMEOUT))
        await asyncio.sleep(0.5)
        assert not ours.done()  # waiting on the other writer's uncommitted row
        await transaction.commit()
        result = await asyncio.wait_for(ours, TIMEOUT)
        assert (result.new, result.clashes, result.unjudged) == (0, [], [0])
        found = await statements.find_clashes(
            second, [str(x)], [hashlib.sha256(b"ours").digest()], TIMEOUT
        )
        assert found == [1]


async def test_values_at_the_limits_of_their_types_are_stored_exactly(
    connections: DriverConnections, statements: InboxStatements
) -> None:
    every_byte = bytes(range(256)) * 3
    text = 'quote " backslash \\ newline \n tab \t line sep \u2028 ü 😀 \x01'
    rows = [
        _row(
            uuid.UUID(int=2**128 - 1),
            every_byte,
            event_key="é" * 255,
            event_name="n" * 255,
            bucket=2**31 - 1,
            headers={"message-id": "x", "h\u00e9\"'": text},
            source_topic="t" * 255,
            source_partition=2**31 - 1,
            source_offset=2**63 - 1,
        ),
        _row(uuid.UUID(int=0), b"", source_partition=0, source_offset=0, bucket=0),
    ]
    async with connections.acquire() as conn:
        result = await statements.insert(conn, rows, TIMEOUT)
    assert result.new == 2
    high, low = await _stored(connections)
    assert high["uuid"] == uuid.UUID(int=2**128 - 1)
    assert bytes(high["payload"]) == every_byte
    assert (high["event_key"], high["event_name"]) == ("é" * 255, "n" * 255)
    assert (high["bucket"], high["source_partition"]) == (2**31 - 1, 2**31 - 1)
    assert (high["source_offset"], high["source_topic"]) == (2**63 - 1, "t" * 255)
    assert high["headers"] == {"message-id": "x", "h\u00e9\"'": text}
    assert (low["uuid"], bytes(low["payload"]), low["source_offset"]) == (uuid.UUID(int=0), b"", 0)


async def test_a_lone_surrogate_is_refused_by_the_database_as_data(
    connections: DriverConnections, statements: InboxStatements
) -> None:
    """Not by the client's encoder: a data error is what makes the consumer store the batch
    row by row and keep the refused row as an unstorable one."""
    async with connections.acquire() as conn:
        with pytest.raises(asyncpg.exceptions.DataError) as refused:
            await statements.insert(conn, [_row(uuid.uuid4(), b"p", event_key="\ud800")], TIMEOUT)
    assert is_data_error(refused.value), refused.value
    assert await _stored(connections) == []


async def test_a_batch_over_the_statement_size_is_stored_whole_or_not_at_all(
    connections: DriverConnections, statements: InboxStatements, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_inbox, "MAX_STATEMENT_BYTES", 4_000)
    ids = [uuid.uuid4() for _ in range(5)]
    rows = [_row(i, bytes([n]) * 1_000) for n, i in enumerate(ids)]
    rows.append(_row(ids[0], b"another payload"))  # in the last chunk, clashing with the first
    assert len(encode(rows).chunks) == 3
    async with connections.acquire() as conn:
        result = await statements.insert(conn, rows, TIMEOUT)
    assert (result.new, result.clashes, result.unjudged) == (5, [5], [])
    assert [r["uuid"] for r in await _stored(connections)] == ids

    more = [_row(uuid.uuid4(), b"x" * 1_000) for _ in range(4)]
    more[-1]["event_key"] = "\ud800"  # refused in the last chunk: the first ones roll back
    async with connections.acquire() as conn:
        with pytest.raises(asyncpg.exceptions.DataError) as refused:
            await statements.insert(conn, more, TIMEOUT)
    assert is_data_error(refused.value)
    assert len(await _stored(connections)) == 5
