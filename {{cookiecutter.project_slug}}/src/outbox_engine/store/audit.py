"""The operator audit log: one row in `outbox_audit` (revision 0004) per change an operator
(or a worker parking a poisoned head) makes to the items or the pauses.

A row says who (`actor`: `cli:<os user>`, `admin:<token name>`, `worker:<host>:<pid>`),
when (`at`, the database's clock), what (`action`, `box` and the `selection` as JSON) and
how many rows it changed (`affected`). `write_audit` runs on the caller's connection or
session, inside the transaction of the change itself: the change and its row commit
together or not at all, so the log never claims a change that was rolled back nor misses
one that was committed.

Rows are never purged by retention: the log is small (one row per action, not per item)
and its value is its history. Delete old rows by hand if a policy requires it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Identity,
    Index,
    Integer,
    Table,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

from outbox_engine.store.metadata import ENGINE_METADATA

AUDIT_TABLE = "outbox_audit"
MAX_LIMIT = 1000

audit_table = Table(
    AUDIT_TABLE,
    ENGINE_METADATA,
    Column("id", BigInteger, Identity(always=False), primary_key=True),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("actor", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("box", Text, nullable=True),
    Column("selection", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("affected", Integer, nullable=False),
    Column("detail", Text, nullable=True),
)
Index("ix_outbox_audit_at", audit_table.c.at)

_INSERT = text(
    f"INSERT INTO {AUDIT_TABLE} (actor, action, box, selection, affected, detail) "
    "VALUES (:actor, :action, :box, CAST(:selection AS jsonb), :affected, :detail) "
    "RETURNING id"
)
# Newest first, by id: ids grow with every insert, while several rows written in one
# transaction share one `at` (now() is the transaction's start).
_SELECT = text(
    f"SELECT id, at, actor, action, box, selection, affected, detail FROM {AUDIT_TABLE} "
    "WHERE (CAST(:box AS text) IS NULL OR box = :box) "
    "AND (CAST(:action AS text) IS NULL OR action = :action) "
    "AND (CAST(:before_id AS bigint) IS NULL OR id < :before_id) "
    "ORDER BY id DESC LIMIT :limit"
)


@dataclass(frozen=True)
class AuditEntry:
    id: int
    at: datetime
    actor: str
    action: str
    box: str | None
    selection: dict[str, Any]
    affected: int
    detail: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at.isoformat(),
            "actor": self.actor,
            "action": self.action,
            "box": self.box,
            "selection": self.selection,
            "affected": self.affected,
            "detail": self.detail,
        }


async def write_audit(
    conn: AsyncConnection | AsyncSession,
    *,
    actor: str,
    action: str,
    box: str | None,
    selection: Mapping[str, object],
    affected: int,
    detail: str | None = None,
) -> int:
    """Insert one audit row on `conn` (in its open transaction) and return its id.

    `selection` is stored as JSON; values JSON cannot hold (datetimes, enums) are stored as
    their text.
    """
    result = await conn.execute(
        _INSERT,
        {
            "actor": actor,
            "action": action,
            "box": box,
            "selection": json.dumps(dict(selection), default=str, sort_keys=True),
            "affected": affected,
            "detail": detail,
        },
    )
    return int(result.scalar_one())


async def recent_audit(
    engine: AsyncEngine,
    limit: int = 50,
    *,
    box: str | None = None,
    action: str | None = None,
    before_id: int | None = None,
) -> list[AuditEntry]:
    """The newest `limit` rows (optionally of one box or action, older than `before_id`)."""
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be 1-{MAX_LIMIT}")
    params = {"box": box, "action": action, "before_id": before_id, "limit": limit}
    async with engine.connect() as conn:
        rows = (await conn.execute(_SELECT, params)).mappings().all()
        await conn.rollback()
    return [AuditEntry(**dict(row)) for row in rows]
