"""The baked project on real PostgreSQL and Kafka: its console script (`migrate`,
`check-config`, `api`) and its own test suite. Services come from TEST_DATABASE_URL and
TEST_KAFKA_BOOTSTRAP_SERVERS, which ./scripts/test.sh exports."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from combos import SUPPORTED, Combo
from conftest import Bakery, Installed, Services, note, run, tail

pytestmark = [pytest.mark.bake, pytest.mark.services]

ALL_SUITES = os.environ.get("TEMPLATE_ALL_SUITES") == "1"
# Extra arguments for the baked suites, e.g. TEMPLATE_SUITE_ARGS='-m "not slow"' locally.
SUITE_ARGS = shlex.split(os.environ.get("TEMPLATE_SUITE_ARGS", ""))
SUITE = list(SUPPORTED)
# The baked suite's tests that kill processes or services (minutes each): full suites only.
FAST_ONLY = ["-m", "not slow and not guarantees"]


def suite_args(combo: Combo, root: Path) -> list[str]:
    """The pytest arguments for one combination's suite (before TEMPLATE_SUITE_ARGS): the
    paths of `combo.modules` that the bake at `root` has (the hook removes some)."""
    if ALL_SUITES or (combo.full_suite and combo.guarantees):
        return []
    if combo.full_suite:
        return ["-m", "not guarantees"]
    return [*FAST_ONLY, *(module for module in combo.modules if (root / module).exists())]


API = [combo for combo in SUPPORTED if combo.run_api]
SUITE_TIMEOUT = 2700
# The combinations without a full suite run this many suites at once (1: one after another).
SUITE_PARALLEL = max(1, int(os.environ.get("TEMPLATE_SUITE_PARALLEL", "2")))
READY_TIMEOUT = 60


def admin_dsn(services: Services) -> str:
    return services.database_url.replace("postgresql+asyncpg://", "postgresql://", 1)


def database_url(services: Services, name: str) -> str:
    base, _, _ = services.database_url.rpartition("/")
    return f"{base}/{name}"


async def _admin(services: Services, *statements: str) -> None:
    conn = await asyncpg.connect(admin_dsn(services))
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


async def _fetchval(url: str, query: str) -> object:
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://", 1))
    try:
        return await conn.fetchval(query)
    finally:
        await conn.close()


@pytest.fixture
def fresh_database(services: Services) -> Iterator[Callable[[], str]]:
    """Creates empty databases on demand (as postgresql+asyncpg:// URLs); drops them after."""
    created: list[str] = []

    def create() -> str:
        name = f"template_{uuid.uuid4().hex[:12]}"
        asyncio.run(_admin(services, f'CREATE DATABASE "{name}"'))
        created.append(name)
        return database_url(services, name)

    yield create
    for name in created:
        asyncio.run(
            _admin(
                services,
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'",
                f'DROP DATABASE IF EXISTS "{name}"',
            )
        )


def service_env(installed: Installed, services: Services, url: str, **extra: str) -> dict[str, str]:
    return installed.env(
        DATABASE_URL=url,
        KAFKA_BOOTSTRAP_SERVERS=services.kafka_bootstrap_servers,
        LOG_FORMAT="text",
        **extra,
    )


def kafka_reachable(bootstrap: str) -> bool:
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return reachable(host, int(port))


def postgres_reachable(database_url: str) -> bool:
    address = database_url.split("@", 1)[-1].split("/", 1)[0]
    host, _, port = address.rpartition(":")
    return reachable(host or "localhost", int(port or 5432))


def reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=3):
            return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("combo", SUPPORTED, ids=[c.id for c in SUPPORTED])
def test_migrate_and_check_config(
    bakery: Bakery, combo: Combo, services: Services, fresh_database: Callable[[], str]
) -> None:
    installed = bakery.install(combo)
    url = fresh_database()
    env = service_env(installed, services, url)
    run([installed.script, "migrate"], cwd=installed.root, env=env)
    assert asyncio.run(_fetchval(url, "SELECT to_regclass('alembic_version') IS NOT NULL")), (
        "migrate exited 0 but created no alembic_version table"
    )
    assert asyncio.run(_fetchval(url, "SELECT count(*) FROM alembic_version")) == 1
    outbox_table = f"{installed.baked.context['outbox_item']}_outbox_items"
    assert asyncio.run(_fetchval(url, f"SELECT to_regclass('{outbox_table}') IS NOT NULL")), (
        f"no {outbox_table} table after migrate"
    )
    # Running it again is a no-op.
    run([installed.script, "migrate"], cwd=installed.root, env=env)

    result = run([installed.script, "check-config"], cwd=installed.root, env=env)
    assert f"{installed.baked.context['outbox_item']}_outbox_item" in result.stdout, result.stdout
    assert f"{installed.baked.context['inbox_item']}_inbox_item" in result.stdout, result.stdout


@pytest.mark.parametrize("combo", API, ids=[c.id for c in API])
def test_api_becomes_ready(
    bakery: Bakery,
    combo: Combo,
    services: Services,
    fresh_database: Callable[[], str],
    tmp_path: Path,
) -> None:
    installed = bakery.install(combo)
    url = fresh_database()
    env = service_env(installed, services, url, METRICS_PORT=str(free_port()))
    run([installed.script, "migrate"], cwd=installed.root, env=env)
    port = free_port()
    log_path = tmp_path / "api.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [str(installed.script), "api", "--host", "127.0.0.1", "--port", str(port)],
            cwd=installed.root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        last = "no answer"
        body: dict[str, object] = {}
        while time.monotonic() < deadline:
            if process.poll() is not None:
                pytest.fail(
                    f"`{installed.baked.slug} api` exited with {process.returncode} before it was "
                    f"ready:\n{tail(log_path.read_text())}",
                    pytrace=False,
                )
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/readyz", timeout=10
                ) as response:
                    body = json.loads(response.read())
                    if response.status == 200:
                        break
                    last = f"{response.status} {body}"
            except urllib.error.HTTPError as exc:
                last = f"{exc.code} {exc.read().decode(errors='replace')}"
            except (OSError, ValueError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(0.5)
        else:
            pytest.fail(
                f"/readyz not 200 within {READY_TIMEOUT}s (last: {last})\n{tail(log_path.read_text())}",
                pytrace=False,
            )
        assert body.get("status") == "ready", body
        checks = body.get("checks")
        assert isinstance(checks, dict), body
        assert checks, body
        assert all(value == "ok" for value in checks.values()), body
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            pytest.fail(f"`api` did not stop within 30s of SIGTERM\n{tail(log_path.read_text())}")
    assert code in (0, -signal.SIGTERM), (
        f"api exited with {code} on SIGTERM\n{tail(log_path.read_text())}"
    )


SUMMARY = re.compile(r"^=*\s*(?P<body>(?:\d+ \w+(?:, )?)+ in [\d.]+s.*?)\s*=*$")


def summary_line(output: str) -> str:
    for line in reversed(output.splitlines()):
        match = SUMMARY.match(line.strip())
        if match:
            return match.group("body")
    return ""


def slowest(output: str) -> list[str]:
    """The lines of pytest's --durations section."""
    lines = output.splitlines()
    for index, line in enumerate(lines):
        if "slowest" in line and "durations" in line:
            return [
                entry for entry in lines[index + 1 : index + 6] if re.match(r"^[\d.]+s ", entry)
            ]
    return []


def counts(summary: str) -> dict[str, int]:
    return {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary.split(" in ")[0])}


@dataclass
class SuiteRun:
    """One combination's suite, finished."""

    result: subprocess.CompletedProcess[str]
    seconds: float
    log_file: Path


def run_suite(installed: Installed, combo: Combo, work: Path) -> SuiteRun:
    log_file = work / "pytest.log"
    started = time.monotonic()
    result = run(
        [
            installed.bin("python"),
            *("-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=15"),
            # Its temporary files live and go with ours.
            f"--basetemp={work / 'tmp'}",
            *suite_args(combo, installed.root),
            *SUITE_ARGS,
        ],
        cwd=installed.root,
        env=installed.env(),  # passes TEST_* (services, Kafka stop/start commands) through
        timeout=SUITE_TIMEOUT,
        check=False,
        log_file=log_file,
    )
    return SuiteRun(result, time.monotonic() - started, log_file)


class SmokeSuites:
    """The suites of the combinations without a full suite, SUITE_PARALLEL at a time, all
    started when the first of their tests runs (after the full suites: those restart
    PostgreSQL and Kafka, and run alone). They share nothing but the servers: each suite
    makes its own database and a Kafka topic and group per test, and a service process it
    starts takes a free port. On two cores one suite keeps about one busy."""

    def __init__(
        self, request: pytest.FixtureRequest, bakery: Bakery, factory: pytest.TempPathFactory
    ) -> None:
        self._request = request
        self._bakery = bakery
        self._factory = factory
        self._pool: ThreadPoolExecutor | None = None
        self._runs: dict[str, Future[SuiteRun]] = {}

    def _start(self) -> None:
        self._pool = ThreadPoolExecutor(SUITE_PARALLEL, thread_name_prefix="suite")
        selected = [
            item.callspec.params["combo"]
            for item in self._request.session.items
            if isinstance(item, pytest.Function)
            and item.originalname == "test_generated_suite_passes"
        ]
        for combo in selected:
            if combo.full_suite or combo.id in self._runs:
                continue
            try:
                installed = self._bakery.install(combo)
                work = self._factory.mktemp(f"suite-{combo.id}")
            except BaseException as exc:  # that combination's test reports it
                failed: Future[SuiteRun] = Future()
                failed.set_exception(exc)
                self._runs[combo.id] = failed
                continue
            self._runs[combo.id] = self._pool.submit(run_suite, installed, combo, work)

    def result(self, combo: Combo) -> SuiteRun:
        if self._pool is None:
            self._start()
        return self._runs[combo.id].result()

    def wait(self) -> None:
        """Until every suite started has ended (before a full suite runs)."""
        for future in self._runs.values():
            future.exception()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="module")
def smoke_suites(
    request: pytest.FixtureRequest, bakery: Bakery, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SmokeSuites]:
    suites = SmokeSuites(request, bakery, tmp_path_factory)
    try:
        yield suites
    finally:
        suites.close()


@pytest.mark.parametrize("combo", SUITE, ids=[c.id for c in SUITE])
def test_generated_suite_passes(
    bakery: Bakery,
    combo: Combo,
    services: Services,
    tmp_path_factory: pytest.TempPathFactory,
    smoke_suites: SmokeSuites,
) -> None:
    installed = bakery.install(combo)
    if combo.full_suite:
        smoke_suites.wait()
        done = run_suite(installed, combo, tmp_path_factory.mktemp(f"suite-{combo.id}"))
    else:
        done = smoke_suites.result(combo)
    result, log_file = done.result, done.log_file
    summary = summary_line(result.stdout) or "(no pytest summary line)"
    extra = [*suite_args(combo, installed.root), *SUITE_ARGS]
    args = f" {shlex.join(extra)}" if extra else ""
    note(f"suite of {combo.id}{args}: {summary} ({done.seconds:.0f}s with setup)")
    for line in slowest(result.stdout):
        note(f"    {line}")
    tally = counts(summary)
    if not kafka_reachable(services.kafka_bootstrap_servers):
        # Recover for the tests that follow, but report it: the suite must restore Kafka.
        if services.kafka_start_cmd:
            subprocess.run(
                services.kafka_start_cmd, shell=True, stdout=subprocess.DEVNULL, check=False
            )
        pytest.fail(f"the suite of {combo.id} left Kafka stopped ({summary})", pytrace=False)
    if not postgres_reachable(services.database_url):
        # The guarantees suite restarts PostgreSQL (TEST_PG_STOP_CMD / TEST_PG_START_CMD).
        if services.pg_start_cmd:
            subprocess.run(
                services.pg_start_cmd, shell=True, stdout=subprocess.DEVNULL, check=False
            )
        pytest.fail(f"the suite of {combo.id} left PostgreSQL stopped ({summary})", pytrace=False)
    if (
        result.returncode != 0
        or tally.get("passed", 0) == 0
        or tally.get("failed", 0)
        or tally.get("error", 0)
        or tally.get("errors", 0)
    ):
        pytest.fail(
            f"the baked project's own suite ({combo.id}) exited with {result.returncode}: "
            f"{summary}\nfull log: {log_file}\n--- last lines ---\n{tail(result.stdout, 80)}",
            pytrace=False,
        )
