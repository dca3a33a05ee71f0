"""An inbox handler whose write the database refuses (numeric overflow, a check or a unique
constraint) fails its item for good after one attempt, and what is stored, shown and logged
names the error and its SQLSTATE but never the statement, its parameters or payload values."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import httpx
import pytest
from sqlalchemy import insert, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from {{ cookiecutter.package_name }}.api.app import create_app
from {{ cookiecutter.package_name }}.container import Container
from {{ cookiecutter.package_name }}.settings import Settings
from outbox_engine.store.status import ItemStatus
from outbox_engine.transports.base import InboxHandler, ItemRecord

from ..support import INBOX_BOX, InboxItem, make_registry, running_worker, transport, wait_for
from .test_admin_api import AUTH, admin_container

FAST = {"min_seconds": 0.1, "max_seconds": 0.1, "multiplier": 1, "jitter": 0}
TABLE = "handler_effects"
SECRETS = ("secret-overflow-5e1", "secret-check-77a", "secret-unique-c0d")


class EffectWriter(InboxHandler):
    """Stores the payload's note and amount in `handler_effects` (amount Numeric(6, 2),
    never negative; notes unique)."""

    async def handle(self, item: ItemRecord, payload: bytes, session: AsyncSession) -> bool:
        body = json.loads(payload)
        await session.execute(
            text(f"INSERT INTO {TABLE} (note, amount) VALUES (:note, :amount)"),
            {"note": body["note"], "amount": Decimal(str(body["amount"]))},
        )
        return True


@pytest.fixture
async def effects_table(container: Container) -> AsyncIterator[None]:
    async with container.engine().begin() as conn:
        await conn.execute(
            text(
                f"CREATE TABLE {TABLE} (note text UNIQUE NOT NULL, "
                "amount numeric(6, 2) NOT NULL CHECK (amount >= 0))"
            )
        )
        # The unique case collides with this row; its DETAIL would name the note.
        await conn.execute(
            text(f"INSERT INTO {TABLE} (note, amount) VALUES (:note, 1)"), {"note": SECRETS[2]}
        )
    yield
    async with container.engine().begin() as conn:
        await conn.execute(text(f"DROP TABLE {TABLE}"))


async def _receive(container: Container, bodies: dict[str, dict[str, Any]]) -> dict[str, int]:
    """Store one inbox item per key, as the consumer would; returns key -> item id."""
    box = make_registry().get(INBOX_BOX)
    rows = [
        {
            "uuid": uuid.uuid4(),
            "event_name": "effect",
            "event_key": key,
            "bucket": box.bucket_for(key),
            "payload": json.dumps(body).encode(),
            "headers": {},
        }
        for key, body in bodies.items()
    ]
    async with container.engine().begin() as conn:
        await conn.execute(insert(InboxItem), rows)
    async with container.session_factory()() as session:
        found = await session.execute(select(InboxItem.event_key, InboxItem.id))
        return {r.event_key: r.id for r in found}


async def _items(container: Container) -> dict[str, tuple[int, int, str | None]]:
    async with container.session_factory()() as session:
        rows = await session.execute(
            select(
                InboxItem.event_key, InboxItem.status, InboxItem.errors_count, InboxItem.last_error
            )
        )
        return {r.event_key: (r.status, r.errors_count, r.last_error) for r in rows}


async def _settled(container: Container) -> bool:
    return all(status != ItemStatus.PENDING for status, _, _ in (await _items(container)).values())


async def test_refused_writes_fail_at_once_and_leak_no_values(
    container: Container,
    settings: Settings,
    effects_table: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = make_registry(
        inbox={"transports": [transport(EffectWriter)], "backoff": FAST, "max_retries": 5}
    )
    ids = await _receive(
        container,
        {
            "overflow": {"note": SECRETS[0], "amount": 12345678},  # > Numeric(6, 2)
            "check": {"note": SECRETS[1], "amount": -3},
            "unique": {"note": SECRETS[2], "amount": 2},
            "fine": {"note": "fine", "amount": "12.34"},
        },
    )
    with caplog.at_level(logging.WARNING):
        async with running_worker(container, registry, boxes=[INBOX_BOX]):
            await wait_for(lambda: _settled(container), within=30)
    items = await _items(container)
    failed = ItemStatus.FAILED
    assert items["fine"] == (ItemStatus.DELIVERED, 0, None)
    assert items["overflow"] == (
        failed,
        1,
        "NumericValueOutOfRangeError (SQLSTATE 22003): numeric field overflow",
    )
    assert items["check"] == (
        failed,
        1,
        f'CheckViolationError (SQLSTATE 23514): new row for relation "{TABLE}" violates '
        f'check constraint "{TABLE}_amount_check"',
    )
    assert items["unique"] == (
        failed,
        1,
        "UniqueViolationError (SQLSTATE 23505): duplicate key value violates unique "
        f'constraint "{TABLE}_note_key"',
    )
    async with container.engine().connect() as conn:
        stored = (await conn.execute(text(f"SELECT note FROM {TABLE} ORDER BY note"))).all()
    assert [row[0] for row in stored] == ["fine", SECRETS[2]]

    # Logged once per item that failed for good, with the same text and no values.
    given_up = [r.getMessage() for r in caplog.records if "failed for good" in r.getMessage()]
    assert len(given_up) == 3
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "SQLSTATE 22003" in logged
    for leak in (*SECRETS, "12345678", "[SQL", "[parameters", "INSERT INTO", "DETAIL", "Key ("):
        assert leak not in logged, leak

    # The admin API shows last_error even where payloads are hidden: no values there either.
    app = create_app(admin_container(container, settings))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as http:
        shown = [
            await http.get(f"/admin/boxes/{INBOX_BOX}/items/{ids[key]}", headers=AUTH)
            for key in ("overflow", "check", "unique")
        ]
        listed = await http.get(f"/admin/boxes/{INBOX_BOX}/items?status=failed", headers=AUTH)
        stats = await http.get(f"/admin/stats?box={INBOX_BOX}", headers=AUTH)
    assert [r.status_code for r in shown] == [200, 200, 200]
    assert [r.json()["last_error"] for r in shown] == [
        items[key][2] for key in ("overflow", "check", "unique")
    ]
    assert [r.json()["payload"] for r in shown] == [None, None, None]
    assert len(listed.json()["items"]) == 3
    for response in (*shown, listed, stats):
        for leak in (*SECRETS, "12345678", "[parameters", "INSERT INTO"):
            assert leak not in response.text, leak


DEFERRED_TABLE = "handler_deferred_effects"


class DeferredWriter(InboxHandler):
    """Stores the payload's note in a table whose checks run at commit: a unique note and a
    trigger that refuses notes starting with "trigger-"."""

    async def handle(self, item: ItemRecord, payload: bytes, session: AsyncSession) -> bool:
        await session.execute(
            text(f"INSERT INTO {DEFERRED_TABLE} (note) VALUES (:note)"),
            {"note": json.loads(payload)["note"]},
        )
        return True


@pytest.fixture
async def deferred_table(container: Container) -> AsyncIterator[None]:
    statements = (
        f"CREATE TABLE {DEFERRED_TABLE} (note text NOT NULL, CONSTRAINT {DEFERRED_TABLE}_note "
        "UNIQUE (note) DEFERRABLE INITIALLY DEFERRED)",
        f"CREATE FUNCTION {DEFERRED_TABLE}_check() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN IF NEW.note LIKE 'trigger-%' THEN RAISE EXCEPTION 'note refused at commit'; "
        "END IF; RETURN NULL; END $$",
        f"CREATE CONSTRAINT TRIGGER {DEFERRED_TABLE}_check AFTER INSERT ON {DEFERRED_TABLE} "
        f"DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {DEFERRED_TABLE}_check()",
    )
    async with container.engine().begin() as conn:
        for statement in statements:
            await conn.execute(text(statement))
        await conn.execute(
            text(f"INSERT INTO {DEFERRED_TABLE} (note) VALUES (:note)"), {"note": SECRETS[2]}
        )
    yield
    async with container.engine().begin() as conn:
        await conn.execute(text(f"DROP TABLE {DEFERRED_TABLE}"))
        await conn.execute(text(f"DROP FUNCTION {DEFERRED_TABLE}_check()"))


async def test_a_commit_that_refuses_the_batch_fails_only_the_item_that_causes_it(
    container: Container, deferred_table: None, caplog: pytest.LogCaptureFixture
) -> None:
    """Checks deferred to commit fail the whole batch transaction, not one savepoint.
    Retried as a batch, the same batch would fail on every claim forever (and hold every
    other item of the batch back); the items are handled again one per transaction, and
    the refusal lands on its item as a failed attempt, bounded by max_retries."""
    registry = make_registry(
        inbox={"transports": [transport(DeferredWriter)], "backoff": FAST, "max_retries": 2}
    )
    bodies = {f"fine-{n}": {"note": f"note-{n}"} for n in range(6)}
    bodies["unique"] = {"note": SECRETS[2]}  # collides with the row already there
    bodies["trigger"] = {"note": "trigger-1"}  # its constraint trigger raises at commit
    await _receive(container, bodies)
    with caplog.at_level(logging.WARNING):
        async with running_worker(container, registry, boxes=[INBOX_BOX]):
            await wait_for(lambda: _settled(container), within=30)
    items = await _items(container)
    for n in range(6):
        assert items[f"fine-{n}"] == (ItemStatus.DELIVERED, 0, None)
    # A unique violation is a refusal of the data: failed for good at its first attempt.
    assert items["unique"] == (
        ItemStatus.FAILED,
        1,
        "UniqueViolationError (SQLSTATE 23505): duplicate key value violates unique "
        f'constraint "{DEFERRED_TABLE}_note"',
    )
    # A trigger's exception may be transient as far as the engine knows: retried, bounded.
    status, attempts, error = items["trigger"]
    assert (status, attempts) == (ItemStatus.FAILED, 3)
    assert error == "RaiseError (SQLSTATE P0001): note refused at commit"
    async with container.engine().connect() as conn:
        stored = (await conn.execute(text(f"SELECT note FROM {DEFERRED_TABLE}"))).scalars()
        assert sorted(stored) == sorted([SECRETS[2], *(f"note-{n}" for n in range(6))])
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "one per transaction" in logged
    for leak in (SECRETS[2], "trigger-1", "[parameters", "INSERT INTO", "Key ("):
        assert leak not in logged, leak
