"""Bad input at the edges, on real PostgreSQL: every case is refused with its exact status
code (HTTP) or exit code 2 and one clear line (CLI), the message names the field, nothing is
traced back, and no row changes."""

from __future__ import annotations

import asyncio
import logging
import re
import socket
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from {{ cookiecutter.package_name }} import cli
from {{ cookiecutter.package_name }}.api.app import create_app
from {{ cookiecutter.package_name }}.container import Container
from {{ cookiecutter.package_name }}.settings import Settings
from outbox_engine.store.pauses import list_pauses
from outbox_engine.store.status import ItemStatus

from ..ops_support import Spec, run_cli, seed, snapshot
from ..support import OUTBOX_BOX, service_env, spawn
from .test_admin_api import AUTH, admin_container

FAILED = ItemStatus.FAILED
ITEMS = f"/admin/boxes/{OUTBOX_BOX}/items"
MAX_BODY = 1024 * 1024


@pytest.fixture
async def seeded(container: Container) -> AsyncIterator[list[Any]]:
    """Two failed items and a pending one; yields the snapshot every case must leave as is."""
    await seed(container, [Spec("1", status=FAILED), Spec("2", status=FAILED), Spec("3")])
    before = await snapshot(container)
    yield before
    assert await snapshot(container) == before
    assert await list_pauses(container.engine()) == []


def app_client(container: Container, settings: Settings, **update: Any) -> httpx.AsyncClient:
    app = create_app(admin_container(container, settings, **update))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


@pytest.fixture
async def client(container: Container, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(container, settings) as http:
        yield http


# -- the operator CLI ----------------------------------------------------------------------

CLI_CASES: list[tuple[tuple[str, ...], dict[str, str], str]] = [
    (("retry", "--box", OUTBOX_BOX, "--id", "²"), {}, "malformed item id '²'"),
    # An Arabic-Indic digit one: a digit to str.isdigit(), not an id.
    (("discard", "--box", OUTBOX_BOX, "--id", "\u0661"), {}, "malformed item id '\u0661'"),
    (("retry", "--box", OUTBOX_BOX, "--status", "²"), {}, "unknown status '²'"),
    (("replay", "--box", OUTBOX_BOX, "--id-range", "²:3"), {}, "malformed id range '²:3'"),
    (
        ("retry", "--box", OUTBOX_BOX, "--id", "9223372036854775808"),
        {},
        "malformed item id '9223372036854775808': ids are integers 1-9223372036854775807",
    ),
    (
        (
            "retry",
            "--box",
            OUTBOX_BOX,
            "--since",
            "2026-01-01T00:00:00",
            "--until",
            "2026-02-01T00:00:00+00:00",
        ),
        {},
        "since and until: give both with a UTC offset or both without one",
    ),
    (
        ("discard", "--box", OUTBOX_BOX, "--until", "9999-12-31T23:00:00-05:00"),
        {},
        "until: time out of range (in UTC it falls outside years 1-9999)",
    ),
    (
        ("retry", "--box", OUTBOX_BOX, "--since", "0001-01-01T00:00:00+01:00"),
        {},
        "since: time out of range",
    ),
    # An undecodable byte in argv arrives as an unpaired surrogate (surrogateescape).
    (("retry", "--box", OUTBOX_BOX, "--key", "k\udcff"), {}, "key must be valid UTF-8 text"),
    (("discard", "--box", OUTBOX_BOX, "--event", "\udce9"), {}, "event must be valid UTF-8 text"),
    (
        ("pause", "--box", OUTBOX_BOX, "--reason", "deploy \udcff"),
        {},
        "--reason must be valid UTF-8 text",
    ),
    (("stats", "--top", "-1"), {}, "top must be 0-100"),
    (("stats", "--top", "101"), {}, "top must be 0-100"),
    (
        ("stats",),
        {"LOG_LEVEL": "LOUD"},
        "invalid settings: LOG_LEVEL is invalid: Value error, must be one of DEBUG, INFO, "
        "WARNING, ERROR, CRITICAL",
    ),
    (
        ("stats",),
        {"ADMIN_TOKEN": "short-token"},
        "invalid settings: ADMIN_TOKEN is invalid: Value error, must be at least 16 characters",
    ),
]


def _main_in_a_thread(argv: tuple[str, ...]) -> int:
    """The console script's `main`, as `sys.exit(main())` would return it, in this process:
    each CLI process spends seconds importing, and the refusals are all in `main`. Logging
    is restored afterwards (main configures the root logger)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        return cli.main(list(argv))
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


async def test_cli_refuses_bad_input_with_exit_2_and_one_line(
    container: Container,
    seeded: list[Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for key, value in service_env(container).items():
        monkeypatch.setenv(key, value)
    errors: list[str] = []
    for args, env, message in CLI_CASES:
        with monkeypatch.context() as scoped:
            for key, value in env.items():
                scoped.setenv(key, value)
            code = await asyncio.to_thread(_main_in_a_thread, args)
        captured = capsys.readouterr()
        assert code == 2, (args, captured)
        assert "Traceback" not in captured.err, args
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1, (args, captured.err)
        assert lines[0].startswith("{{ cookiecutter.project_slug }}: "), lines
        assert message in lines[0], (args, lines[0])
        assert captured.out == "", args
        errors.append(captured.err)
    assert "short-token" not in errors[-1]  # the refused token is named, not repeated


async def test_cli_processes_exit_2_without_a_traceback(
    container: Container, seeded: list[Any]
) -> None:
    """The same, as real processes: an undecodable argument byte and a bad LOG_LEVEL."""
    env = service_env(container)
    cases = [
        (("retry", "--box", OUTBOX_BOX, "--key", "k\udcff"), env, "key must be valid UTF-8"),
        (("stats",), {**env, "LOG_LEVEL": "LOUD"}, "LOG_LEVEL is invalid"),
    ]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda case: run_cli(*case[0], env=case[1]), cases))
    for (args, _env, message), result in zip(cases, results, strict=True):
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.count("\n") == 1, result.stderr
        assert message in result.stderr
        assert "Traceback" not in result.stderr


# -- the admin API -------------------------------------------------------------------------


ADMIN_CASES: list[tuple[str, str, Any, int, str]] = [
    ("GET", f"{ITEMS}?status=²", None, 400, "unknown status '²'"),
    ("GET", f"{ITEMS}?status=failed&status=٣", None, 400, "unknown status '٣'"),
    (
        "GET",
        f"{ITEMS}?since=2026-01-01T00:00:00&until=2026-02-01T00:00:00Z",
        None,
        400,
        "since and until: give both with a UTC offset or both without one",
    ),
    (
        "GET",
        f"{ITEMS}?since=2026-01-01T00:00:00%2B02:00&until=2026-02-01T00:00:00",
        None,
        400,
        "since and until",
    ),
    (
        "GET",
        f"{ITEMS}?since=9999-12-31T23:00:00-05:00",
        None,
        400,
        "since: time out of range",
    ),
    ("GET", f"{ITEMS}?since=10000-01-01T00:00:00", None, 422, '"since"'),
    ("GET", f"{ITEMS}?key=a%00b", None, 400, "key must not contain NUL characters"),
    ("GET", f"{ITEMS}?event=%00", None, 400, "event must not contain NUL characters"),
    ("GET", f"{ITEMS}/9223372036854775808", None, 422, '"item_id"'),
    ("GET", f"{ITEMS}/%C2%B2", None, 422, '"item_id"'),
    ("GET", f"{ITEMS}?after_id=9223372036854775808", None, 422, '"after_id"'),
    ("GET", "/admin/stats?top=-1", None, 422, '"top"'),
    ("POST", f"/admin/boxes/{OUTBOX_BOX}/retry", b'{"ids": [NaN]}', 422, "NaN is not allowed"),
    (
        "POST",
        f"/admin/boxes/{OUTBOX_BOX}/retry",
        b'{"ids": [1], "dry_run": Infinity}',
        422,
        "Infinity is not allowed",
    ),
    (
        "POST",
        f"/admin/boxes/{OUTBOX_BOX}/discard",
        b'{"ids": [1e400]}',
        422,
        "number out of range",
    ),
    (
        "POST",
        f"/admin/boxes/{OUTBOX_BOX}/retry",
        b'{"ids": [9223372036854775808]}',
        422,
        '"ids"',
    ),
    (
        "POST",
        f"/admin/boxes/{OUTBOX_BOX}/pause",
        b'{"key": "k\\ud800"}',
        422,
        '"loc":["body","key"]',
    ),
    (
        "POST",
        f"/admin/boxes/{OUTBOX_BOX}/pause",
        b'{"reason": "deploy\\u0000"}',
        422,
        '"loc":["body","reason"]',
    ),
]


@pytest.mark.parametrize(("method", "path", "body", "status", "detail"), ADMIN_CASES)
async def test_admin_api_refuses_bad_input_with_a_4xx(
    client: httpx.AsyncClient,
    seeded: list[Any],
    method: str,
    path: str,
    body: bytes | None,
    status: int,
    detail: str,
) -> None:
    headers = {**AUTH, "Content-Type": "application/json"}
    response = await client.request(method, path, content=body, headers=headers)
    assert response.status_code == status, response.text
    assert detail in response.text, response.text
    if status == 422:  # located, and never the refused value itself
        assert set(response.json()["detail"][0]) == {"loc", "msg", "type"}


async def test_an_undecodable_query_value_is_plain_text_not_an_error(
    client: httpx.AsyncClient, seeded: list[Any]
) -> None:
    # %ED%A0%80 would be an unpaired surrogate; the query decoder replaces it.
    response = await client.get(f"{ITEMS}?key=%ED%A0%80", headers=AUTH)
    assert response.status_code == 200
    assert response.json() == {"items": [], "next_after_id": None}


# -- hardening: body size, echoes, docs --------------------------------------------------------


async def test_a_body_over_the_limit_is_413_and_changes_nothing(
    client: httpx.AsyncClient, seeded: list[Any]
) -> None:
    reason = "x" * (2 * MAX_BODY)
    response = await client.post(
        f"/admin/boxes/{OUTBOX_BOX}/pause", json={"reason": reason}, headers=AUTH
    )
    assert response.status_code == 413
    assert response.json() == {"detail": f"request body too large: at most {MAX_BODY} bytes"}

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"reason": "'
        for _ in range(40):
            yield b"y" * 65536
        yield b'"}'

    streamed = await client.post(
        f"/admin/boxes/{OUTBOX_BOX}/pause",
        content=chunks(),
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert streamed.status_code == 413
    assert "request body too large" in streamed.text


async def test_a_422_never_echoes_a_2_mb_field(
    container: Container, settings: Settings, seeded: list[Any]
) -> None:
    async with app_client(container, settings, api_max_body_bytes=8 * MAX_BODY) as http:
        reason = "z" * 2_000_000
        response = await http.post(
            f"/admin/boxes/{OUTBOX_BOX}/pause", json={"reason": reason}, headers=AUTH
        )
    assert response.status_code == 422
    assert len(response.content) < 500
    assert "zzzz" not in response.text
    assert response.json() == {
        "detail": [
            {
                "loc": ["body", "reason"],
                "msg": "String should have at most 1000 characters",
                "type": "string_too_long",
            }
        ]
    }


async def test_docs_pages_are_never_served_and_the_schema_only_when_asked(
    container: Container, settings: Settings
) -> None:
    async with app_client(container, settings) as http:
        for path in ("/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect"):
            assert (await http.get(path)).status_code == 404, path
    async with app_client(container, settings, api_docs=True) as http:
        schema = await http.get("/openapi.json")
        assert schema.status_code == 200
        assert "/admin/boxes/{box}/retry" in schema.json()["paths"]
        assert (await http.get("/docs")).status_code == 404
        assert (await http.get("/redoc")).status_code == 404


# -- probes bind to loopback unless told otherwise ------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _outward_address() -> str | None:
    """An address of this machine that is not loopback, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        try:
            udp.connect(("10.254.254.254", 9))  # no packet is sent
            address = str(udp.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") else address


async def _reachable(host: str, port: int) -> bool:
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 2)
    except OSError:
        return False
    writer.close()
    return True


async def test_worker_probes_listen_on_loopback_by_default(container: Container) -> None:
    port = _free_port()
    env = service_env(container, WORKER_PROBE_PORT=str(port), LOG_LEVEL="INFO")
    env.pop("PROBE_HOST", None)
    worker = spawn(["worker"], env)
    try:
        for _ in range(200):
            if await _reachable("127.0.0.1", port):
                break
            await asyncio.sleep(0.1)
        assert await _reachable("127.0.0.1", port)
        outward = _outward_address()
        if outward is not None:  # another address of this machine: not listening there
            assert not await _reachable(outward, port)
    finally:
        worker.terminate()
        _out, err = worker.communicate(timeout=60)
    log = err.decode()
    assert re.search(rf"probes on http://127\.0\.0\.1:{port} ", log), log[-2000:]
