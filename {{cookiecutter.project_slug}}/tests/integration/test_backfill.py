"""Backfill of a replicated model: under its rate budget, resumable after a kill, no row
emitted twice (marked slow: 50,000 rows)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time

import pytest
from sqlalchemy import func, select, text

from {{ cookiecutter.package_name }}.container import Container

from ..replicated import Thing, things  # noqa: F401 - fixture
from ..support import PROJECT_ROOT, OutboxItem, service_env, spawn, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("things")]

ROWS = 50_000
RATE = 20_000.0


async def watermark(container: Container) -> int:
    async with container.engine().connect() as conn:
        emitted = (
            await conn.execute(
                text("SELECT emitted FROM outbox_backfills WHERE name = 'replicated_things'")
            )
        ).scalar()
    return int(emitted or 0)


async def _started(container: Container) -> bool:
    return await watermark(container) > 0


async def test_a_backfill_of_50000_rows_respects_its_budget_and_resumes_after_a_kill(
    container: Container,
) -> None:
    async with container.engine().begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO replicated_things (account_id, name) "
                "SELECT g % 100, 'thing ' || g FROM generate_series(1, :n) AS g"
            ),
            {"n": ROWS},
        )
    env = service_env(container)
    # No worker drains the box in this test: let the backlog grow past the whole backfill.
    command = [
        "backfill",
        f"{Thing.__module__}:Thing",
        *("--rate", str(RATE), "--batch-size", "1000", "--max-pending", str(2 * ROWS)),
    ]
    first = spawn(command, env)
    await wait_for(lambda: _started(container), within=60)
    await asyncio.sleep(0.5)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    done_before_kill = await watermark(container)
    assert 0 < done_before_kill < ROWS

    started = time.monotonic()
    second = spawn(command, env)
    code = await asyncio.to_thread(second.wait, 300)
    elapsed = time.monotonic() - started
    assert code == 0, second.stderr.read().decode() if second.stderr else ""
    # The rate budget holds: the rest took at least as long as the budget allows.
    assert elapsed >= (ROWS - done_before_kill) / RATE * 0.9

    async with container.session_factory()() as session:
        emitted = (
            await session.execute(
                select(
                    func.count(), func.count(func.distinct(OutboxItem.headers["object-id"].astext))
                ).where(OutboxItem.event_name == "thing_update")
            )
        ).one()
    assert tuple(emitted) == (ROWS, ROWS)  # every row once, none twice across the kill
    assert await watermark(container) == ROWS


def test_the_backfill_command_refuses_a_model_that_is_not_replicated(container: Container) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "{{ cookiecutter.package_name }}.cli", "backfill", "tests.support:InboxItem"],
        env=service_env(container),
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "is not a replicated model" in result.stderr
