"""The admin API on real PostgreSQL: token checks, listing and paging, one item, retry,
discard, pause/resume, stats, and bad input that changes nothing."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from dependency_injector import providers

from {{ cookiecutter.package_name }}.api.app import create_app
from {{ cookiecutter.package_name }}.container import Container
from {{ cookiecutter.package_name }}.settings import Settings
from outbox_engine.store.pauses import list_pauses
from outbox_engine.store.status import ItemStatus

from ..ops_support import Spec, seed, snapshot, states
from ..support import OUTBOX_BOX, make_registry

TOKEN = "s3cret-admin-token-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
FAILED, DELIVERED = ItemStatus.FAILED, ItemStatus.DELIVERED


def admin_container(container: Container, settings: Settings, **update: Any) -> Container:
    """A container with an admin token that shares the test run's engine and registry."""
    admin = Container()
    admin.settings.override(settings.model_copy(update={"admin_token": TOKEN, **update}))
    admin.engine.override(providers.Object(container.engine()))
    admin.registry.override(providers.Object(container.registry()))
    return admin


@pytest.fixture
async def client(container: Container, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(admin_container(container, settings))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        yield http


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": TOKEN},
    ],
)
async def test_every_admin_route_needs_the_token(
    client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    for method, path in [
        ("GET", "/admin/boxes"),
        ("GET", "/admin/stats"),
        ("GET", f"/admin/boxes/{OUTBOX_BOX}/items"),
        ("GET", f"/admin/boxes/{OUTBOX_BOX}/items/1"),
        ("POST", f"/admin/boxes/{OUTBOX_BOX}/retry"),
        ("POST", f"/admin/boxes/{OUTBOX_BOX}/discard"),
        ("GET", "/admin/pauses"),
        ("POST", f"/admin/boxes/{OUTBOX_BOX}/pause"),
        ("POST", f"/admin/boxes/{OUTBOX_BOX}/resume"),
    ]:
        response = await client.request(method, path, headers=headers, json={"ids": [1]})
        assert response.status_code == 401, (method, path)
        assert response.headers["www-authenticate"] == "Bearer"


async def test_without_a_token_admin_is_disabled_and_says_so(
    container: Container, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    disabled = admin_container(container, settings, admin_token=None)
    with caplog.at_level(logging.WARNING):
        app = create_app(disabled)
    assert "admin API disabled: ADMIN_TOKEN is not set" in caplog.text
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as http:
        for path in ("/admin/boxes", "/admin/ui"):
            response = await http.get(path, headers=AUTH)
            assert response.status_code == 503
            assert "set ADMIN_TOKEN" in response.text


async def test_boxes_and_stats(client: httpx.AsyncClient, container: Container) -> None:
    await seed(container, [Spec("1")] * 2 + [Spec("2", "ev", FAILED, 3, "Boom")])
    boxes = (await client.get("/admin/boxes", headers=AUTH)).json()
    assert [b["name"] for b in boxes] == container.registry().names()
    assert boxes[0]["payload_shown"] is False
    stats = (await client.get("/admin/stats", params={"box": OUTBOX_BOX}, headers=AUTH)).json()
    assert stats[0]["counts"] == {
        "pending": 2,
        "failed": 1,
        "delivered": 0,
        "discarded": 0,
        "parked": 0,
    }
    assert stats[0]["failing"][0]["last_error"] == "Boom"
    assert (
        await client.get("/admin/stats", params={"box": "nope"}, headers=AUTH)
    ).status_code == 404


async def test_list_filters_and_pages(client: httpx.AsyncClient, container: Container) -> None:
    ids = await seed(
        container,
        [Spec(str(n % 3), "even" if n % 2 == 0 else "odd") for n in range(12)]
        + [Spec("9", "odd", FAILED, 2, "E")],
    )
    url = f"/admin/boxes/{OUTBOX_BOX}/items"
    page = (await client.get(url, params={"limit": 5}, headers=AUTH)).json()
    assert [i["id"] for i in page["items"]] == ids[:5]
    assert page["next_after_id"] == ids[4]
    seen = [i["id"] for i in page["items"]]
    while page["next_after_id"] is not None:
        params = {"limit": 5, "after_id": page["next_after_id"]}
        page = (await client.get(url, params=params, headers=AUTH)).json()
        seen += [i["id"] for i in page["items"]]
    assert seen == ids
    failed = (await client.get(url, params={"status": "failed"}, headers=AUTH)).json()["items"]
    assert [(i["id"], i["status"], i["last_error"]) for i in failed] == [(ids[12], "failed", "E")]
    by_key = (await client.get(url, params={"key": "1", "event": "odd"}, headers=AUTH)).json()
    assert [i["id"] for i in by_key["items"]] == [ids[1], ids[7]]
    later = (await client.get(url, params={"since": "2999-01-01T00:00:00Z"}, headers=AUTH)).json()
    assert later == {"items": [], "next_after_id": None}


async def test_one_item_hides_its_payload_unless_the_box_shows_it(
    client: httpx.AsyncClient, container: Container, settings: Settings
) -> None:
    [item_id] = await seed(container, [Spec("k", "ev", FAILED, 4, "Traceback: deep\\nreason")])
    url = f"/admin/boxes/{OUTBOX_BOX}/items/{item_id}"
    item = (await client.get(url, headers=AUTH)).json()
    assert item["status"] == "failed"
    assert item["last_error"] == "Traceback: deep\\nreason"
    assert item["payload"] is None
    assert item["payload_shown"] is False
    assert item["payload_bytes"] == len(b'{"n":0}')
    assert "correlation-id" in item["headers"]
    assert (
        await client.get(f"/admin/boxes/{OUTBOX_BOX}/items/999999", headers=AUTH)
    ).status_code == 404

    shown = admin_container(container, settings)
    shown.registry.override(
        providers.Object(
            make_registry(outbox={"admin_show_payload": True, "admin_redact": f"{__name__}:redact"})
        )
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(shown)), base_url="http://test"
    ) as http:
        item = (await http.get(url, headers=AUTH)).json()
    assert item["payload_shown"] is True
    assert item["payload"] == '{"n":"<redacted>"}'


def redact(event_name: str, payload: bytes) -> str:
    """The redaction hook of the test above."""
    assert event_name == "ev"
    return payload.decode().replace("0", '"<redacted>"')


async def test_retry_and_discard_by_ids(client: httpx.AsyncClient, container: Container) -> None:
    ids = await seed(
        container,
        [Spec("1", status=FAILED, errors=5)] * 2 + [Spec("2", status=DELIVERED), Spec("3")],
    )
    base = f"/admin/boxes/{OUTBOX_BOX}"
    dry = await client.post(f"{base}/retry", json={"ids": ids, "dry_run": True}, headers=AUTH)
    assert dry.json() == {"action": "retry", "box": OUTBOX_BOX, "rows": 3, "dry_run": True}
    retried = await client.post(f"{base}/retry", json={"ids": ids[:3]}, headers=AUTH)
    assert retried.json()["rows"] == 2  # a delivered item is replayed, not retried
    discarded = await client.post(f"{base}/discard", json={"ids": [ids[0], ids[3]]}, headers=AUTH)
    assert discarded.json()["rows"] == 2
    now = await states(container)
    assert [now[i] for i in ids] == [
        ("discarded", 0),
        ("pending", 0),
        ("delivered", 0),
        ("discarded", 0),
    ]


async def test_pause_resume_and_list(client: httpx.AsyncClient, container: Container) -> None:
    base = f"/admin/boxes/{OUTBOX_BOX}"
    body = {"key": "k'9", "reason": "hot"}
    assert (await client.post(f"{base}/pause", json=body, headers=AUTH)).json() == {
        "paused": f'key "k\'9" of box {OUTBOX_BOX}',
        "created": True,
    }
    assert (await client.post(f"{base}/pause", json={"bucket": 1}, headers=AUTH)).json()["created"]
    listed = (await client.get("/admin/pauses", headers=AUTH)).json()
    assert [(p["bucket"], p["key"], p["reason"]) for p in listed] == [
        (1, None, ""),
        (None, "k'9", "hot"),
    ]
    assert (await client.post(f"{base}/resume", json={"key": "k'9"}, headers=AUTH)).json() == {
        "resumed": 1
    }
    assert (await client.post(f"{base}/resume", json={"all": True}, headers=AUTH)).json() == {
        "resumed": 1
    }
    assert await list_pauses(container.engine()) == []


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "detail"),
    [
        ("GET", "/admin/boxes/nope/items", None, 404, "unknown box 'nope'"),
        ("GET", f"/admin/boxes/{OUTBOX_BOX}/items?status=stuck", None, 400, "unknown status"),
        ("GET", f"/admin/boxes/{OUTBOX_BOX}/items?limit=100000", None, 422, ""),
        ("GET", f"/admin/boxes/{OUTBOX_BOX}/items?since=yesterday", None, 422, ""),
        ("GET", f"/admin/boxes/{OUTBOX_BOX}/items/abc", None, 422, ""),
        ("GET", f"/admin/boxes/{OUTBOX_BOX}/items/99999999999999999999", None, 422, ""),
        ("POST", f"/admin/boxes/{OUTBOX_BOX}/retry", {"ids": ["1; drop table x"]}, 422, ""),
        ("POST", f"/admin/boxes/{OUTBOX_BOX}/retry", {"ids": []}, 422, ""),
        ("POST", f"/admin/boxes/{OUTBOX_BOX}/discard", {"ids": [-1]}, 422, ""),
        ("POST", "/admin/boxes/nope/retry", {"ids": [1]}, 404, "unknown box"),
        ("POST", f"/admin/boxes/{OUTBOX_BOX}/pause", {"bucket": 99999}, 400, "has buckets 0-"),
        ("POST", f"/admin/boxes/{OUTBOX_BOX}/pause", {"bucket": 1, "key": "k"}, 400, "not both"),
        ("POST", "/admin/boxes/x%27%3B%20drop/pause", {}, 404, "unknown box"),
        ("GET", "/admin/pauses?box=nope", None, 404, "unknown box"),
    ],
)
async def test_bad_input_is_refused_and_changes_nothing(
    client: httpx.AsyncClient,
    container: Container,
    method: str,
    path: str,
    body: dict[str, Any] | None,
    status: int,
    detail: str,
) -> None:
    await seed(container, [Spec("1", status=FAILED), Spec("2")])
    before = await snapshot(container)
    response = await client.request(method, path, json=body, headers=AUTH)
    assert response.status_code == status, response.text
    assert detail in response.text
    assert await snapshot(container) == before
    assert await list_pauses(container.engine()) == []


async def test_filters_with_sql_metacharacters_are_plain_values(
    client: httpx.AsyncClient, container: Container
) -> None:
    hostile = "x' OR '1'='1"
    ids = await seed(container, [Spec(hostile, status=FAILED), Spec("other", status=FAILED)])
    url = f"/admin/boxes/{OUTBOX_BOX}/items"
    found = (await client.get(url, params={"key": hostile}, headers=AUTH)).json()["items"]
    assert [i["id"] for i in found] == [ids[0]]
    none = (await client.get(url, params={"event": "' OR 1=1 --"}, headers=AUTH)).json()
    assert none["items"] == []
