"""The Debezium tests' session: Kafka Connect from TEST_CONNECT_URL (the tests fail with how
to provide it when it is missing), a fresh service per test (`dbz`), and the table of
numbers of every test (the guarantees suite's `report.Row`), printed at the end of the
session and written to DEBEZIUM_REPORT (default <pytest's base temp dir>/debezium-report.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest

from ..guarantees.report import Row, table, write
from ..services import Services
from .connect import ConnectUnavailable, connect_url
from .harness import DebeziumService, debezium_service

ROWS = pytest.StashKey[list[Row]]()


@pytest.fixture(scope="session")
def connect(services: Services) -> str:
    try:
        return connect_url()
    except ConnectUnavailable as exc:
        reason = str(exc)
    pytest.fail(reason, pytrace=False)


ServiceFactory = Callable[..., AbstractAsyncContextManager[DebeziumService]]


@pytest.fixture
def dbz(services: Services, connect: str, tmp_path: Path) -> ServiceFactory:
    """`async with dbz("label") as service:` a fresh Debezium-relayed service (harness.py)."""

    def make(label: str, **options: object) -> AbstractAsyncContextManager[DebeziumService]:
        return debezium_service(
            label,
            services.database_url,
            services.kafka_bootstrap_servers,
            connect,
            tmp_path / label,
            **options,  # type: ignore[arg-type]
        )

    return make


@pytest.fixture
def ledger(request: pytest.FixtureRequest) -> list[Row]:
    """Rows a test appends (its numbers), printed in the session's table."""
    return request.config.stash.setdefault(ROWS, [])


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    rows = config.stash.get(ROWS, [])
    if not rows:
        return
    path = Path(
        os.environ.get("DEBEZIUM_REPORT")
        or config._tmp_path_factory.getbasetemp() / "debezium-report.md"  # type: ignore[attr-defined]
    )
    write(path, rows)
    terminalreporter.write_sep("=", "debezium relay: per-test numbers")
    terminalreporter.write_line(table(rows))
    terminalreporter.write_line(f"(written to {path})")
