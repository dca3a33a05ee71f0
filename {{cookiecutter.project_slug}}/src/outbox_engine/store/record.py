"""Recording a batch's outcomes, fenced against a worker that no longer owns the items.

A worker records what it did in one short transaction after delivery. Between its claim and
its record, the bucket may have changed hands (its lock connection dropped, another worker
took over and handled the same items): so every state change names the state its writer
expects, which is the state it claimed:

* delivered, discarded: the item is still pending;
* a failed attempt: the item is still pending *and* has the attempt count of the claim, so
  two owners that both fail an item count one attempt, and a stale failure never moves an
  item that another worker already delivered back to pending.

* an inbox item handled: its row is locked first, in the handler's transaction, only while
  still pending with the claim's attempt count (`InboxRecorder.lock`), and marked delivered
  in that transaction only if still pending (`InboxRecorder.handled`).

A change that finds another state is dropped and counted (`Recorded.fenced`), never applied.
Items that fail for good in a strict box with `poisoned_head: park` are parked and an audit
row says so, in the same transaction.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from outbox_engine.store.pgconn import asyncpg_sql
from outbox_engine.store.status import ItemStatus

# An item state change (or the whole recording) that takes longer is abandoned and retried.
STATEMENT_TIMEOUT = 60.0
AUDIT_TABLE = "outbox_audit"


@dataclass(frozen=True, slots=True)
class FailedAttempt:
    id: int
    expected_errors: int  # errors_count when claimed: the fence
    errors_count: int
    status: ItemStatus
    error: str
    delay_seconds: float


@dataclass(slots=True)
class Recorded:
    fenced: int = 0
    parked: list[int] = field(default_factory=list)


def _count(status: str) -> int:
    """Rows an asyncpg `execute` changed, from its status line ("UPDATE 12")."""
    return int(status.rsplit(" ", 1)[-1])


def worker_actor() -> str:
    return f"worker:{socket.gethostname()}:{os.getpid()}"


class Recorder:
    def __init__(self, table: str, box_name: str) -> None:
        self.box_name = box_name
        self.actor = worker_actor()
        pending = int(ItemStatus.PENDING)
        self._delivered_sql = asyncpg_sql(
            f"UPDATE {table} SET status = {int(ItemStatus.DELIVERED)}, processed_at = now(), "
            f"next_attempt_at = NULL WHERE id = ANY(CAST(:ids AS bigint[])) AND status = {pending}",
            "ids",
        )
        self._failed_sql = asyncpg_sql(
            f"""
            UPDATE {table} AS t SET errors_count = u.errors_count, status = u.status,
                last_error = u.error,
                next_attempt_at = CASE WHEN u.status = {pending}
                    THEN now() + make_interval(secs => u.delay) ELSE NULL END,
                processed_at = CASE WHEN u.status = {pending} THEN NULL ELSE now() END
            FROM unnest(CAST(:ids AS bigint[]), CAST(:errors AS integer[]),
                        CAST(:statuses AS smallint[]), CAST(:messages AS text[]),
                        CAST(:delays AS double precision[]), CAST(:expected AS integer[]))
                 AS u(id, errors_count, status, error, delay, expected)
            WHERE t.id = u.id AND t.status = {pending} AND t.errors_count = u.expected
            RETURNING t.id, t.status
            """,
            "ids",
            "errors",
            "statuses",
            "messages",
            "delays",
            "expected",
        )
        self._discard_sql = asyncpg_sql(
            f"""
            UPDATE {table} AS t SET status = {int(ItemStatus.DISCARDED)}, processed_at = now(),
                last_error = u.reason, next_attempt_at = NULL
            FROM unnest(CAST(:ids AS bigint[]), CAST(:reasons AS text[])) AS u(id, reason)
            WHERE t.id = u.id AND t.status = {pending}
            """,
            "ids",
            "reasons",
        )
        self._audit_sql = (
            f"INSERT INTO {AUDIT_TABLE} (actor, action, box, selection, affected, detail) "
            "VALUES ($1, 'park', $2, $3::jsonb, $4, $5)"
        )

    async def record(
        self,
        conn: Any,
        delivered: list[int],
        failed: list[FailedAttempt],
        discards: list[tuple[int, str]],
    ) -> Recorded:
        """Apply the outcomes on `conn` (an asyncpg connection): one statement alone commits
        by itself; several, or a park with its audit row, commit together."""
        recorded = Recorded()
        if not (delivered or failed or discards):
            return recorded
        parks = any(f.status is ItemStatus.PARKED for f in failed)
        if bool(delivered) + bool(failed) + bool(discards) == 1 and not parks:
            await self._apply(conn, recorded, delivered, failed, discards)
            return recorded
        async with conn.transaction():
            await self._apply(conn, recorded, delivered, failed, discards)
            if recorded.parked:
                await conn.execute(
                    self._audit_sql,
                    self.actor,
                    self.box_name,
                    json.dumps({"ids": recorded.parked}),
                    len(recorded.parked),
                    "failed for good in a strict box (poisoned_head: park): moved aside, "
                    "its key moves on",
                    timeout=STATEMENT_TIMEOUT,
                )
        return recorded

    async def _apply(
        self,
        conn: Any,
        recorded: Recorded,
        delivered: list[int],
        failed: list[FailedAttempt],
        discards: list[tuple[int, str]],
    ) -> None:
        if delivered:
            status = await conn.execute(self._delivered_sql, delivered, timeout=STATEMENT_TIMEOUT)
            recorded.fenced += len(delivered) - _count(status)
        if failed:
            rows = await conn.fetch(
                self._failed_sql,
                [f.id for f in failed],
                [f.errors_count for f in failed],
                [int(f.status) for f in failed],
                [f.error for f in failed],
                [f.delay_seconds for f in failed],
                [f.expected_errors for f in failed],
                timeout=STATEMENT_TIMEOUT,
            )
            recorded.fenced += len(failed) - len(rows)
            recorded.parked = [r[0] for r in rows if r[1] == int(ItemStatus.PARKED)]
        if discards:
            status = await conn.execute(
                self._discard_sql,
                [item_id for item_id, _ in discards],
                [reason for _, reason in discards],
                timeout=STATEMENT_TIMEOUT,
            )
            recorded.fenced += len(discards) - _count(status)


class InboxRecorder:
    """The inbox's state changes inside the transaction its handlers write in."""

    def __init__(self, table: str) -> None:
        pending = int(ItemStatus.PENDING)
        # Lock the claimed rows still pending. A row another worker holds (it is handling it
        # now) is skipped, not waited for; a row no longer pending is not returned.
        self._lock_sql = text(
            f"SELECT id, errors_count FROM {table} WHERE id = ANY(CAST(:ids AS bigint[])) "
            f"AND status = {pending} FOR UPDATE SKIP LOCKED"
        )
        self._handled_sql = text(
            f"UPDATE {table} SET status = {int(ItemStatus.DELIVERED)}, processed_at = now(), "
            f"next_attempt_at = NULL WHERE id = :id AND status = {pending}"
        )

    async def lock(self, session: AsyncSession, ids: Sequence[int]) -> dict[int, int]:
        """Lock the rows of `ids` still pending and free: id -> errors_count of each. A row
        missing, or with another attempt count than its claim's, is fenced by the caller."""
        result = await session.execute(self._lock_sql, {"ids": ids})
        return {row[0]: row[1] for row in result}

    async def handled(self, session: AsyncSession, item_id: int) -> None:
        """Mark a locked pending item delivered, in its handler's savepoint."""
        await session.execute(self._handled_sql, {"id": item_id})
