"""The example domain validates strictly: order amounts and ids, the order status state
machine, PATCHes that change nothing emit nothing, and payment messages that do not
validate pay nothing and fail for good with a reason that names the field, not the value."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import httpx
import pytest
from sqlalchemy import func, insert, select, update

from {{ cookiecutter.package_name }}.api.app import create_app
from {{ cookiecutter.package_name }}.container import Container
from {{ cookiecutter.package_name }}.domain.models import Order
from {{ cookiecutter.package_name }}.domain.rules import TRANSITIONS, money
from {{ cookiecutter.package_name }}.domain.service import create_order
from outbox_engine.store.status import ItemStatus

from ..support import INBOX_BOX, InboxItem, OutboxItem, make_registry, running_worker, wait_for

MAX_BIGINT = 2**63 - 1


@pytest.fixture
async def client(container: Container) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(container)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as http:
        yield http


async def rows(container: Container, model: Any) -> int:
    async with container.session_factory()() as session:
        return int((await session.execute(select(func.count()).select_from(model))).scalar_one())


async def new_order(client: httpx.AsyncClient, amount: str = "10.00") -> dict[str, Any]:
    created = await client.post("/orders", json={"customer_id": "c", "amount": amount})
    assert created.status_code == 201, created.text
    body: dict[str, Any] = created.json()
    return body


# -- creating and reading orders -------------------------------------------------------------

BAD_ORDERS: list[tuple[bytes, str]] = [
    (b'{"customer_id": "c", "amount": 0.005}', "no more than 2 decimal places"),
    (b'{"customer_id": "c", "amount": "1.001"}', "no more than 2 decimal places"),
    (b'{"customer_id": "c", "amount": true}', '"amount"'),
    (b'{"customer_id": "c", "amount": 0}', "greater than 0"),
    (b'{"customer_id": "c", "amount": -1}', "greater than 0"),
    (b'{"customer_id": "c", "amount": 1000000000000}', '"amount"'),
    (b'{"customer_id": "c", "amount": NaN}', "non-finite number NaN is not allowed"),
    (b'{"customer_id": "c", "amount": Infinity}', "non-finite number Infinity"),
    (b'{"customer_id": "c", "amount": -Infinity}', "non-finite number -Infinity"),
    (b'{"customer_id": "c", "amount": 1e400}', "number out of range"),
    (b'{"customer_id": "c", "amount": "NaN"}', '"amount"'),
    (b'{"customer_id": "c\\u0000", "amount": 1}', '"loc":["body","customer_id"]'),
    (b'{"customer_id": "\\ud800", "amount": 1}', '"loc":["body","customer_id"]'),
    (b'{"customer_id": 7, "amount": 1}', '"customer_id"'),
    (b'{"customer_id": "c", "amount": 1, "status": "paid"}', '"status"'),
]


@pytest.mark.parametrize(("body", "detail"), BAD_ORDERS)
async def test_bad_orders_are_422_and_store_nothing(
    client: httpx.AsyncClient, container: Container, body: bytes, detail: str
) -> None:
    response = await client.post(
        "/orders", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422, response.text
    assert detail in response.text
    assert (await rows(container, Order), await rows(container, OutboxItem)) == (0, 0)


@pytest.mark.parametrize("order_id", [str(MAX_BIGINT + 1), "0", "-1", "²", "1.0", "1e3"])
async def test_order_ids_outside_bigint_or_not_integers_are_422(
    client: httpx.AsyncClient, container: Container, order_id: str
) -> None:
    await new_order(client)
    outbox_before = await rows(container, OutboxItem)
    assert (await client.get(f"/orders/{order_id}")).status_code == 422
    patched = await client.patch(f"/orders/{order_id}", json={"status": "paid"})
    assert patched.status_code == 422
    assert '"order_id"' in patched.text
    assert await rows(container, OutboxItem) == outbox_before
    assert (await client.get(f"/orders/{MAX_BIGINT}")).status_code == 404


async def test_the_largest_amount_the_column_holds_is_accepted(
    client: httpx.AsyncClient,
) -> None:
    assert (await new_order(client, "999999999999.99"))["amount"] == 999999999999.99


# -- the status state machine ----------------------------------------------------------------


async def test_status_changes_follow_the_state_machine(
    client: httpx.AsyncClient, container: Container
) -> None:
    order = await new_order(client)
    url = f"/orders/{order['id']}"
    refused = await client.patch(url, json={"status": "shipped"})
    assert refused.status_code == 409
    assert refused.json() == {
        "detail": "status: an order in status 'created' cannot become 'shipped' "
        "(allowed: cancelled, paid)"
    }
    steps = ["paid", "shipped", "delivered"]
    for version, status in enumerate(steps, start=2):
        response = await client.patch(url, json={"status": status})
        assert response.status_code == 200, response.text
        assert (response.json()["status"], response.json()["version"]) == (status, version)
    final = await client.patch(url, json={"status": "refunded"})
    assert final.status_code == 409
    assert "(allowed: none: it is final)" in final.text
    assert (await client.patch(url, json={"status": "lost"})).status_code == 422
    async with container.session_factory()() as session:
        events = (
            await session.execute(select(OutboxItem.event_name).order_by(OutboxItem.id))
        ).scalars()
        assert list(events) == ["order_created"] + ["order_updated"] * len(steps)


def test_every_status_has_its_row_in_the_state_machine() -> None:
    targets = {status for allowed in TRANSITIONS.values() for status in allowed}
    assert targets <= set(TRANSITIONS)
    assert "created" not in targets  # nothing goes back to created


async def test_a_patch_that_changes_nothing_emits_nothing(
    client: httpx.AsyncClient, container: Container
) -> None:
    order = await new_order(client, "10.00")
    url = f"/orders/{order['id']}"
    before = await rows(container, OutboxItem)
    for body in ({"status": "created"}, {"amount": "10"}, {"amount": 10.0, "status": "created"}):
        response = await client.patch(url, json=body)
        assert response.status_code == 200, (body, response.text)
        assert response.json()["version"] == 1
    assert await rows(container, OutboxItem) == before
    changed = await client.patch(url, json={"amount": "12.50"})
    assert (changed.json()["amount"], changed.json()["version"]) == (12.5, 2)
    assert await rows(container, OutboxItem) == before + 1


async def test_the_amount_changes_only_while_created_and_empty_patches_are_422(
    client: httpx.AsyncClient, container: Container
) -> None:
    order = await new_order(client)
    url = f"/orders/{order['id']}"
    assert (await client.patch(url, json={})).status_code == 422
    assert (await client.patch(url, json={"amount": "0.001"})).status_code == 422
    assert (await client.patch(url, json={"status": "paid"})).status_code == 200
    before = await rows(container, OutboxItem)
    refused = await client.patch(url, json={"amount": "11.00"})
    assert refused.status_code == 409
    assert refused.json() == {
        "detail": "amount: can only change while the order is 'created', not 'paid'"
    }
    assert await rows(container, OutboxItem) == before


# -- payments (the inbox handler) ------------------------------------------------------------


def test_money_is_exact_or_refused() -> None:
    assert money(Decimal("0.10")) == Decimal("0.1")
    assert money("12.50") == Decimal("12.50")
    assert money(7) == Decimal(7)
    for bad in (True, 1.5, "1e3", " 1", "0.005", Decimal("NaN"), Decimal("1E+400"), "-1"):
        with pytest.raises(ValueError, match=r"^amount: "):
            money(bad)


async def _receive(container: Container, payloads: dict[str, bytes]) -> None:
    box = make_registry().get(INBOX_BOX)
    async with container.engine().begin() as conn:
        await conn.execute(
            insert(InboxItem),
            [
                {
                    "uuid": uuid.uuid4(),
                    "event_name": "payment_received",
                    "event_key": key,
                    "bucket": box.bucket_for(key),
                    "payload": payload,
                    "headers": {},
                }
                for key, payload in payloads.items()
            ],
        )


async def _inbox(container: Container) -> dict[str, tuple[int, int, str | None]]:
    async with container.session_factory()() as session:
        found = await session.execute(
            select(
                InboxItem.event_key, InboxItem.status, InboxItem.errors_count, InboxItem.last_error
            )
        )
        return {r.event_key: (r.status, r.errors_count, r.last_error) for r in found}


async def _handled(container: Container) -> bool:
    return all(s != ItemStatus.PENDING for s, _, _ in (await _inbox(container)).values())


MALFORMED = "PermanentFailure: malformed payment_received payload: "


async def test_payments_that_do_not_validate_pay_nothing_and_fail_at_once(
    container: Container,
) -> None:
    async with container.session_factory()() as session, session.begin():
        orders = [
            await create_order(session, container.outbox(), f"c{n}", Decimal(100))
            for n in range(12)
        ]
        big = await create_order(session, container.outbox(), "big", Decimal(100))
        await session.execute(
            update(Order).where(Order.id == big.id).values(paid_amount=Decimal("999999999999.00"))
        )
    assert [o.id for o in orders][:11] == list(range(1, 12))  # orders 1 and 11 exist
    outbox_before = await rows(container, OutboxItem)
    # The reasons are PaymentReceived's (domain/events.py), as the EventHandler reports them.
    cases: dict[str, tuple[bytes, str]] = {
        "true": (b'{"order_id": true, "amount": 5}', "order_id: Input should be a valid integer"),
        "float": (b'{"order_id": 11.9, "amount": 5}', "order_id: Input should be a valid integer"),
        "string": (b'{"order_id": "11", "amount": 5}', "order_id: Input should be a valid integer"),
        "huge": (
            b'{"order_id": 9223372036854775808, "amount": 5}',
            "order_id: Input should be less than or equal to",
        ),
        "cents": (
            b'{"order_id": 1, "amount": 0.005}',
            "amount: Decimal input should have no more than 2 decimal places",
        ),
        "zero": (b'{"order_id": 1, "amount": 0}', "amount: Input should be greater than 0"),
        "bool": (b'{"order_id": 1, "amount": false}', "amount: Decimal input should be"),
        "inf": (b'{"order_id": 1, "amount": 1e400}', "amount: Input should be a finite number"),
        "nan": (b'{"order_id": 1, "amount": NaN}', "amount: Input should be a finite number"),
        "missing": (b'{"order_id": 1}', "amount: Field required"),
        "list": (b"[1, 2]", "Input should be an object"),
        "text": (b"not json", "Invalid JSON"),
    }
    await _receive(container, {key: payload for key, (payload, _) in cases.items()})
    # Valid, but the sum no longer fits the paid_amount column: the database refuses it.
    await _receive(container, {"overflow": b'{"order_id": %d, "amount": 1000}' % big.id})
    await _receive(container, {"good": b'{"order_id": 11, "amount": "2.50"}'})
    async with running_worker(container, make_registry(), boxes=[INBOX_BOX]):
        await wait_for(lambda: _handled(container), within=30)
    inbox = await _inbox(container)
    assert inbox.pop("good") == (ItemStatus.DELIVERED, 0, None)
    assert inbox.pop("overflow") == (
        ItemStatus.FAILED,
        1,
        "NumericValueOutOfRangeError (SQLSTATE 22003): numeric field overflow",
    )
    for key, (_payload, reason) in cases.items():
        status, attempts, error = inbox[key]
        assert (status, attempts) == (ItemStatus.FAILED, 1), key
        assert error is not None
        assert error.startswith(MALFORMED + reason), (key, error)
        # The reason names the field; the payload's values are not repeated.
        for value in ("11.9", '"11"', "0.005", "1e400", "9223372036854775808"):
            assert value not in error, (key, error)
    async with container.session_factory()() as session:
        paid = dict((await session.execute(select(Order.id, Order.paid_amount))).all())
    assert paid.pop(11) == Decimal("2.50")
    assert paid.pop(big.id) == Decimal("999999999999.00")
    assert set(paid.values()) == {Decimal(0)}
    assert await rows(container, OutboxItem) == outbox_before + 1  # one order_paid
    async with container.session_factory()() as session:
        newest = select(OutboxItem.payload).order_by(OutboxItem.id.desc()).limit(1)
        event = (await session.execute(newest)).scalar_one_or_none()
    assert event is not None
    assert json.loads(event)["payment_amount"] == 2.5
