"""The guarantees suite's session: where scenarios run, soak budgets, and the table of
numbers printed at the end of the session and written to a file
(GUARANTEES_REPORT, default <pytest's base temp dir>/guarantees-report.md)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ..services import Services
from .report import Row, aggregate, table, write
from .scenarios import COMMITTED_WITHIN, Scenario, run_scenario

LEDGER = pytest.StashKey[list[Row]]()
REPORT_PATH = pytest.StashKey[Path]()

Check = Callable[[Row], list[str]]


def standard_failures(row: Row, planned_items: int) -> list[str]:
    """The guarantees every scenario must keep, as readable failures."""
    failures = []
    if row.facts.get("not_drained"):
        failures.append("items still pending when the drain time was up")
    if row.facts.get("uncommitted"):
        failures.append(
            f"{row.facts['uncommitted']} inbox messages stored but their offsets not committed "
            f"{COMMITTED_WITHIN:.0f} s after the drain"
        )
    if row.facts.get("offsets_unreadable"):
        failures.append(
            f"the inbox's committed offsets could not be read for {COMMITTED_WITHIN:.0f} s "
            "after the drain (the notes give the error)"
        )
    if row.created < planned_items:
        failures.append(f"created {row.created} < {planned_items} planned")
    if row.lost:
        failures.append(f"lost {row.lost} committed items")
    if row.phantom:
        failures.append(f"{row.phantom} messages on the topic were never committed")
    if row.out_of_order:
        failures.append(f"{row.out_of_order} per-key order violations (the box is ordered)")
    if row.inbox_stored != row.inbox_expected:
        failures.append(f"inbox stored {row.inbox_stored} rows for {row.inbox_expected} ids")
    if row.inbox_effects != row.inbox_expected:
        failures.append(f"inbox effects {row.inbox_effects} for {row.inbox_expected} ids")
    if row.inbox_mismatched:
        failures.append(
            f"{row.inbox_mismatched} inbox ids stored/applied but not produced or the reverse"
        )
    return failures


@dataclass
class Guarantees:
    database_url: str
    bootstrap: str
    workdir: Path
    fast: bool
    soak_seconds: float
    scenario_count: int
    ledger: list[Row] = field(default_factory=list)

    @property
    def kafka_outage_seconds(self) -> float:
        return 10.0 if self.fast else 30.0

    async def check(self, scenario: Scenario, extra: Check | None = None) -> None:
        """Run the scenario (repeatedly in soak mode, for its share of the soak time) and
        fail on the first run that breaks a guarantee."""
        budget = self.soak_seconds / max(self.scenario_count, 1)
        started = time.monotonic()
        round_ = 0
        while True:
            workdir = self.workdir / f"{scenario.name}-{round_}"
            row, logs = await run_scenario(scenario, self.database_url, self.bootstrap, workdir)
            failures = standard_failures(row, scenario.load.items)
            if extra is not None:
                failures += extra(row)
            row.passed = not failures
            self.ledger.append(row)
            assert not failures, (
                f"{scenario.name}: " + "; ".join(failures) + "\n" + table([row]) + "\n" + logs
            )
            round_ += 1
            if time.monotonic() - started >= budget:
                return


@pytest.fixture(scope="session")
def guarantees(
    request: pytest.FixtureRequest,
    database_url: str,
    services: Services,
    tmp_path_factory: pytest.TempPathFactory,
) -> Guarantees:
    config = request.config
    ledger = config.stash.setdefault(LEDGER, [])
    config.stash[REPORT_PATH] = Path(
        os.environ.get("GUARANTEES_REPORT")
        or tmp_path_factory.getbasetemp() / "guarantees-report.md"
    )
    count = sum(1 for item in request.session.items if item.get_closest_marker("guarantees"))
    return Guarantees(
        database_url=database_url,
        bootstrap=services.kafka_bootstrap_servers,
        workdir=tmp_path_factory.mktemp("guarantees"),
        fast=bool(config.getoption("guarantees_fast")),
        soak_seconds=float(config.getoption("soak_seconds")),
        scenario_count=count,
        ledger=ledger,
    )


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    rows = config.stash.get(LEDGER, [])
    if not rows:
        return
    merged = aggregate(rows)
    path = config.stash[REPORT_PATH]
    write(path, merged)
    terminalreporter.write_sep("=", "guarantees: per-scenario numbers")
    terminalreporter.write_line(table(merged))
    terminalreporter.write_line(f"(written to {path})")
