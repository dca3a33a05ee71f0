"""Helpers of the operator-tooling tests: items in chosen states, and table snapshots that
prove a refused command changed nothing."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import text

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.store.status import ItemStatus

from .support import PROJECT_ROOT, OutboxItem

TABLE = OutboxItem.__tablename__


@dataclass(frozen=True)
class Spec:
    key: str
    event: str = "thing_happened"
    status: ItemStatus = ItemStatus.PENDING
    errors: int = 0
    last_error: str | None = None
    age: timedelta = timedelta(0)
    waiting: bool = False  # in backoff: next attempt in an hour


async def seed(container: Container, specs: list[Spec]) -> list[int]:
    """Create the items (in one transaction) and put each in its state; returns the ids."""
    async with container.session_factory()() as session, session.begin():
        await container.outbox().create_batch(
            session,
            OutboxItem,
            [
                {"event_key": s.key, "event_name": s.event, "payload": {"n": i}}
                for i, s in enumerate(specs)
            ],
        )
        rows = await session.execute(
            text(f"SELECT id FROM {TABLE} ORDER BY id DESC LIMIT :n"), {"n": len(specs)}
        )
        ids = sorted(row[0] for row in rows)
        for item_id, spec in zip(ids, specs, strict=True):
            await session.execute(
                text(
                    f"UPDATE {TABLE} SET status = :status, errors_count = :errors, "
                    "last_error = :last_error, created_at = now() - make_interval(secs => :age), "
                    "next_attempt_at = CASE WHEN :waiting THEN now() + interval '1 hour' END, "
                    "processed_at = CASE WHEN :done THEN now() END WHERE id = :id"
                ),
                {
                    "status": int(spec.status),
                    "errors": spec.errors,
                    "last_error": spec.last_error,
                    "age": spec.age.total_seconds(),
                    "waiting": spec.waiting,
                    "done": spec.status in (ItemStatus.DELIVERED, ItemStatus.DISCARDED),
                    "id": item_id,
                },
            )
    return ids


async def snapshot(container: Container) -> list[tuple[Any, ...]]:
    """Every column that an operator action could change, of every item."""
    async with container.engine().connect() as conn:
        rows = await conn.execute(
            text(
                f"SELECT id, status, errors_count, last_error, next_attempt_at, processed_at "
                f"FROM {TABLE} ORDER BY id"
            )
        )
        return [tuple(row) for row in rows]


async def states(container: Container) -> dict[int, tuple[str, int]]:
    """id -> (status name, errors_count)."""
    async with container.engine().connect() as conn:
        rows = await conn.execute(text(f"SELECT id, status, errors_count FROM {TABLE}"))
        return {r[0]: (ItemStatus(r[1]).name.lower(), r[2]) for r in rows}


def run_cli(
    *args: str, env: dict[str, str], cwd: Any = PROJECT_ROOT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "{{ cookiecutter.package_name }}.cli", *args],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,  # no terminal: a command that would ask refuses instead
        capture_output=True,
        text=True,
        timeout=120,
    )
