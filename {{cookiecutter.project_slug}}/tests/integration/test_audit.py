"""The operator audit log on real PostgreSQL: every action of the CLI and the admin API
(retry, discard, replay, park, purge, pause, resume) writes exactly one row naming who,
which selection and how many rows; dry runs and refused commands write none; a change
never commits without its row; the log reads back newest first."""

from __future__ import annotations

import getpass
import hashlib
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from {{ cookiecutter.package_name }}.api.app import create_app
from {{ cookiecutter.package_name }}.container import Container
from {{ cookiecutter.package_name }}.settings import Settings
from outbox_engine.operations.actions import RETRY, apply
from outbox_engine.operations.selection import Selection
from outbox_engine.store.audit import recent_audit, write_audit
from outbox_engine.store.status import ItemStatus

from ..ops_support import Spec, run_cli, seed, snapshot, states
from ..support import OUTBOX_BOX, service_env
from .test_admin_api import AUTH, TOKEN, admin_container

PENDING, FAILED, DELIVERED, DISCARDED, PARKED = (
    ItemStatus.PENDING,
    ItemStatus.FAILED,
    ItemStatus.DELIVERED,
    ItemStatus.DISCARDED,
    ItemStatus.PARKED,
)
ME = f"cli:{getpass.getuser()}"
Row = tuple[str, str, str | None, dict[str, Any], int, str | None]


async def audit_rows(container: Container) -> list[Row]:
    """(actor, action, box, selection, affected, detail) of every row, oldest first."""
    async with container.engine().connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT actor, action, box, selection, affected, detail FROM outbox_audit "
                "ORDER BY id"
            )
        )
        return [tuple(row) for row in rows]


def cli(container: Container, *args: str) -> str:
    result = run_cli(*args, env=service_env(container))
    assert result.returncode == 0, result.stderr
    return result.stdout


async def test_every_cli_action_writes_one_row_with_actor_selection_and_count(
    container: Container,
) -> None:
    ids = await seed(
        container,
        [Spec("1", "a", FAILED, 6, "x")] * 3
        + [Spec("2", "b", FAILED, 6, "y")] * 2
        + [Spec("3", status=DELIVERED)] * 2
        + [Spec("4", status=DELIVERED, age=timedelta(days=30))]
        + [Spec("5", status=DISCARDED, age=timedelta(days=30))],
    )
    box = OUTBOX_BOX
    # A dry run changes nothing and says nothing in the log.
    assert "would change 3 items" in cli(
        container, "retry", "--box", box, "--event", "a", "--dry-run"
    )
    assert await audit_rows(container) == []

    assert "changed 3 items" in cli(container, "retry", "--yes", "--box", box, "--event", "a")
    assert "changed 1 items" in cli(
        container,
        "park",
        "--yes",
        "--box",
        box,
        "--key",
        "2",
        "--id",
        str(ids[3]),
        "--actor",
        "alice",
    )
    assert "changed 1 items" in cli(
        container, "discard", "--yes", "--box", box, "--status", "parked", "--actor", "bob"
    )
    rng = f"{ids[5]}:{ids[6]}"
    assert "changed 2 items" in cli(container, "replay", "--yes", "--box", box, "--id-range", rng)
    assert "deleted 1 delivered and 1 failed/discarded/parked items" in cli(
        container, "purge", "--yes", "--box", box
    )
    cli(container, "pause", "--box", box, "--key", "k9", "--reason", "hot key")
    cli(container, "pause", "--box", box, "--key", "k9")  # already paused: affects nothing
    cli(container, "pause", "--box", box, "--bucket", "1")
    assert "(2 pauses lifted)" in cli(container, "resume", "--box", box, "--all")

    retention = {
        "delivered_older_than_seconds": 86400.0,
        "failed_discarded_parked_older_than_seconds": 14 * 86400.0,
    }
    assert await audit_rows(container) == [
        (ME, "retry", box, {"event": "a", "statuses": ["failed"]}, 3, None),
        (
            "cli:alice",
            "park",
            box,
            {"ids": [ids[3]], "key": "2", "statuses": ["failed", "pending"]},
            1,
            None,
        ),
        ("cli:bob", "discard", box, {"statuses": ["parked"]}, 1, None),
        (
            ME,
            "replay",
            box,
            {"first_id": ids[5], "last_id": ids[6], "statuses": ["delivered"]},
            2,
            None,
        ),
        (ME, "purge", box, retention, 2, "deleted 1 delivered and 1 failed/discarded/parked items"),
        (ME, "pause", box, {"key": "k9"}, 1, "hot key"),
        (ME, "pause", box, {"key": "k9"}, 0, None),
        (ME, "pause", box, {"bucket": 1}, 1, None),
        (ME, "resume", box, {"all": True}, 2, None),
    ]
    now = await states(container)
    assert [now[i][0] for i in ids[:5]] == ["pending"] * 3 + ["discarded", "failed"]


async def test_refused_commands_write_no_row(container: Container) -> None:
    await seed(container, [Spec("1", status=FAILED), Spec("2", status=DELIVERED)])
    before = await snapshot(container)
    env = service_env(container)
    for args, message in [
        (("park", "--box", OUTBOX_BOX, "--status", "delivered"), "park applies to failed, pending"),
        (("retry", "--box", OUTBOX_BOX, "--actor", ""), "--actor must be"),
        (("audit", "--limit", "0"), "--limit must be 1-1000"),
        (("audit", "--box", "nope"), "unknown box 'nope'"),
    ]:
        result = run_cli(*args, env=env)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert message in result.stderr, (args, result.stderr)
    assert await snapshot(container) == before
    assert await audit_rows(container) == []


async def test_the_audit_command_lists_newest_first(container: Container) -> None:
    assert cli(container, "audit").strip() == "the audit log is empty"
    async with container.engine().begin() as conn:
        for n in range(5):
            await write_audit(
                conn,
                actor=f"cli:op{n}",
                action="retry" if n % 2 == 0 else "discard",
                box=OUTBOX_BOX,
                selection={"ids": [n + 1]},
                affected=n,
                detail="why" if n == 4 else None,
            )
    lines = cli(container, "audit", "--limit", "3").splitlines()
    assert len(lines) == 3
    fields = [line.split("\t") for line in lines]
    assert [f[0] for f in fields] == ["5", "4", "3"]
    assert fields[0][2:] == ["cli:op4", "retry", OUTBOX_BOX, "4", '{"ids": [5]}', "why"]
    listed = json.loads(cli(container, "audit", "--json", "--action", "discard"))
    assert [(e["id"], e["actor"], e["affected"]) for e in listed] == [
        (4, "cli:op3", 3),
        (2, "cli:op1", 1),
    ]
    assert cli(container, "audit", "--action", "park").strip() == "no audit rows match"


async def test_a_change_never_commits_without_its_audit_row(container: Container) -> None:
    """The row is written in the change's transaction: when it cannot be written (here an
    actor PostgreSQL refuses), the change is rolled back with it."""
    await seed(container, [Spec("1", status=FAILED)] * 2)
    before = await snapshot(container)
    box = container.registry().get(OUTBOX_BOX)
    with pytest.raises(DBAPIError):
        await apply(container.engine(), box, RETRY, Selection(), actor="nul\x00actor")
    assert await snapshot(container) == before
    assert await audit_rows(container) == []
    result = await apply(container.engine(), box, RETRY, Selection(), actor="cli:ok")
    assert result.rows == 2
    assert [(r[0], r[4]) for r in await audit_rows(container)] == [("cli:ok", 2)]


async def test_the_workers_own_retention_writes_no_row(container: Container) -> None:
    from outbox_engine.store.retention import purge

    await seed(container, [Spec("1", status=PARKED, age=timedelta(days=30))] * 2)
    report = await purge(container.engine(), container.registry().get(OUTBOX_BOX))
    assert (report.delivered, report.failed_or_discarded) == (0, 2)
    assert await audit_rows(container) == []


# -- the admin API -------------------------------------------------------------------------


@pytest.fixture
async def client(container: Container, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(admin_container(container, settings))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        yield http


async def test_every_admin_action_writes_one_row_naming_the_token(
    client: httpx.AsyncClient, container: Container
) -> None:
    ids = await seed(
        container,
        [Spec("1", status=FAILED, errors=5)] * 2 + [Spec("2", status=DELIVERED), Spec("3")],
    )
    actor = f"admin:token-{hashlib.sha256(TOKEN.encode()).hexdigest()[:8]}"
    base = f"/admin/boxes/{OUTBOX_BOX}"
    calls: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
        ("retry", {"ids": ids, "dry_run": True}, {"rows": 3, "dry_run": True}),
        ("park", {"ids": ids[:2]}, {"rows": 2}),
        ("retry", {"ids": [ids[0]]}, {"rows": 1}),
        ("discard", {"ids": [ids[1], ids[3]]}, {"rows": 2}),
        ("replay", {"ids": [ids[2]]}, {"rows": 1}),
        ("pause", {"bucket": 2, "reason": "deploy"}, {"created": True}),
        ("resume", {"bucket": 2}, {"resumed": 1}),
    ]
    for action, body, expected in calls:
        response = await client.post(f"{base}/{action}", json=body, headers=AUTH)
        assert response.status_code == 200, (action, response.text)
        assert expected.items() <= response.json().items(), (action, response.json())
    assert await audit_rows(container) == [
        (actor, "park", OUTBOX_BOX, {"ids": ids[:2], "statuses": ["failed", "pending"]}, 2, None),
        (
            actor,
            "retry",
            OUTBOX_BOX,
            {"ids": [ids[0]], "statuses": ["failed", "discarded", "pending", "parked"]},
            1,
            None,
        ),
        (
            actor,
            "discard",
            OUTBOX_BOX,
            {"ids": [ids[1], ids[3]], "statuses": ["failed", "pending", "parked"]},
            2,
            None,
        ),
        (actor, "replay", OUTBOX_BOX, {"ids": [ids[2]], "statuses": ["delivered"]}, 1, None),
        (actor, "pause", OUTBOX_BOX, {"bucket": 2}, 1, "deploy"),
        (actor, "resume", OUTBOX_BOX, {"bucket": 2}, 1, None),
    ]
    now = await states(container)
    assert [now[i][0] for i in ids] == ["pending", "discarded", "pending", "discarded"]

    # The audit log over HTTP: newest first, paged by id.
    page = (await client.get("/admin/audit", params={"limit": 4}, headers=AUTH)).json()
    assert [e["action"] for e in page["entries"]] == ["resume", "pause", "replay", "discard"]
    assert page["entries"][0]["actor"] == actor
    older = (
        await client.get(
            "/admin/audit", params={"limit": 4, "before_id": page["next_before_id"]}, headers=AUTH
        )
    ).json()
    assert [e["action"] for e in older["entries"]] == ["retry", "park"]
    assert older["next_before_id"] is None
    parks = (await client.get("/admin/audit", params={"action": "park"}, headers=AUTH)).json()
    assert [(e["affected"], e["selection"]["ids"]) for e in parks["entries"]] == [(2, ids[:2])]


async def test_a_named_token_is_named_in_the_log(container: Container, settings: Settings) -> None:
    [item_id] = await seed(container, [Spec("1", status=FAILED)])
    app = create_app(admin_container(container, settings, admin_token_name="ops-team"))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as http:
        response = await http.post(
            f"/admin/boxes/{OUTBOX_BOX}/park", json={"ids": [item_id]}, headers=AUTH
        )
    assert response.json()["rows"] == 1
    [entry] = await recent_audit(container.engine(), 10)
    assert (entry.actor, entry.action, entry.affected) == ("admin:ops-team", "park", 1)


@pytest.mark.parametrize(
    ("path", "status", "detail"),
    [
        ("/admin/audit?limit=0", 422, ""),
        ("/admin/audit?limit=100000", 422, ""),
        ("/admin/audit?before_id=-1", 422, ""),
        ("/admin/audit?box=nope", 404, "unknown box 'nope'"),
    ],
)
async def test_bad_audit_queries_are_refused(
    client: httpx.AsyncClient, path: str, status: int, detail: str
) -> None:
    response = await client.get(path, headers=AUTH)
    assert response.status_code == status, response.text
    assert detail in response.text


async def test_the_audit_route_needs_the_token(client: httpx.AsyncClient) -> None:
    for method, path in (("GET", "/admin/audit"), ("POST", f"/admin/boxes/{OUTBOX_BOX}/park")):
        response = await client.request(method, path, json={"ids": [1]})
        assert response.status_code == 401, (method, path)
