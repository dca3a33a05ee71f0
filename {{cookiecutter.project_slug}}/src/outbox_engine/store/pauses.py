"""The kill switch: pause a whole box, one bucket or one key at runtime.

Pauses are rows in `outbox_pauses` (revision 0002), so every worker process sees them: each
reads the table at most every `refresh_seconds` through a `PauseReader` and, while a pause
holds, claims nothing from a paused box or bucket and skips the items of a paused key
(they stay pending and untouched, and later items of other keys move on). Resuming deletes
the row; workers pick the work up again at their next refresh.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

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
    literal,
    text,
)
from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.store.audit import write_audit
from outbox_engine.store.metadata import ENGINE_METADATA

log = logging.getLogger(__name__)

pauses_table = Table(
    "outbox_pauses",
    ENGINE_METADATA,
    Column("id", BigInteger, Identity(always=False), primary_key=True),
    Column("box", Text, nullable=False),
    Column("bucket", Integer, nullable=True),
    Column("event_key", Text, nullable=True),
    Column("reason", Text, nullable=False, server_default=text("''")),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
Index(
    "uq_outbox_pauses_target",
    pauses_table.c.box,
    func.coalesce(pauses_table.c.bucket, literal(-1)),
    func.coalesce(pauses_table.c.event_key, literal("")),
    unique=True,
)

_INSERT = text(
    """
    INSERT INTO outbox_pauses (box, bucket, event_key, reason)
    VALUES (:box, :bucket, :event_key, :reason)
    ON CONFLICT (box, (coalesce(bucket, -1)), (coalesce(event_key, ''))) DO NOTHING
    """
)
_DELETE = text(
    """
    DELETE FROM outbox_pauses
    WHERE box = :box AND coalesce(bucket, -1) = coalesce(CAST(:bucket AS integer), -1)
      AND coalesce(event_key, '') = coalesce(CAST(:event_key AS text), '')
    """
)
_DELETE_BOX = text("DELETE FROM outbox_pauses WHERE box = :box")
_SELECT = text(
    "SELECT box, bucket, event_key, reason, created_at FROM outbox_pauses "
    "WHERE CAST(:box AS text) IS NULL OR box = :box "
    # The box itself first, then its buckets, then its keys.
    "ORDER BY box, bucket IS NOT NULL OR event_key IS NOT NULL, event_key IS NOT NULL, "
    "bucket, event_key"
)


@dataclass(frozen=True)
class Pause:
    box: str
    bucket: int | None = None
    event_key: str | None = None
    reason: str = ""
    created_at: datetime | None = None

    @property
    def target(self) -> str:
        if self.bucket is not None:
            return f"bucket {self.bucket} of box {self.box}"
        if self.event_key is not None:
            return f"key {self.event_key!r} of box {self.box}"
        return f"box {self.box}"


async def add_pause(
    engine: AsyncEngine,
    box: str,
    *,
    bucket: int | None = None,
    event_key: str | None = None,
    reason: str = "",
    actor: str | None = None,
) -> bool:
    """Pause a box, or one of its buckets or keys; False if that pause already existed.

    With `actor` (an operator), an audit row is written in the same transaction."""
    if bucket is not None and event_key is not None:
        raise ValueError("pause a bucket or a key, not both")
    params = {"box": box, "bucket": bucket, "event_key": event_key, "reason": reason}
    async with engine.begin() as conn:
        result = await conn.execute(_INSERT, params)
        added = int(getattr(result, "rowcount", 0) or 0)
        if actor is not None:
            target = {"bucket": bucket, "key": event_key}
            await write_audit(
                conn,
                actor=actor,
                action="pause",
                box=box,
                selection={k: v for k, v in target.items() if v is not None},
                affected=added,
                detail=reason or None,
            )
    return bool(added)


async def remove_pause(
    engine: AsyncEngine,
    box: str,
    *,
    bucket: int | None = None,
    event_key: str | None = None,
    every: bool = False,
    actor: str | None = None,
) -> int:
    """Lift one pause (or, with `every`, every pause of the box); returns how many went.

    The box's workers are woken so that they notice at their next refresh. With `actor`
    (an operator), an audit row is written in the same transaction.
    """
    async with engine.begin() as conn:
        if every:
            result = await conn.execute(_DELETE_BOX, {"box": box})
        else:
            params = {"box": box, "bucket": bucket, "event_key": event_key}
            result = await conn.execute(_DELETE, params)
        removed = int(getattr(result, "rowcount", 0) or 0)
        if actor is not None:
            target = {"bucket": bucket, "key": event_key, "all": every or None}
            await write_audit(
                conn,
                actor=actor,
                action="resume",
                box=box,
                selection={k: v for k, v in target.items() if v is not None},
                affected=removed,
            )
        await conn.execute(text("SELECT pg_notify(:channel, '')"), {"channel": f"box_{box}"})
    return removed


async def list_pauses(engine: AsyncEngine, box: str | None = None) -> list[Pause]:
    async with engine.connect() as conn:
        rows = (await conn.execute(_SELECT, {"box": box})).mappings().all()
    return [Pause(**dict(row)) for row in rows]


@dataclass(frozen=True)
class PauseSet:
    """What is paused right now, in the shape the worker asks about it."""

    boxes: frozenset[str] = frozenset()
    buckets: dict[str, frozenset[int]] = field(default_factory=dict)
    keys: dict[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, pauses: Iterable[Pause]) -> PauseSet:
        boxes: set[str] = set()
        buckets: dict[str, set[int]] = {}
        keys: dict[str, set[str]] = {}
        for pause in pauses:
            if pause.bucket is not None:
                buckets.setdefault(pause.box, set()).add(pause.bucket)
            elif pause.event_key is not None:
                keys.setdefault(pause.box, set()).add(pause.event_key)
            else:
                boxes.add(pause.box)
        return cls(
            frozenset(boxes),
            {box: frozenset(values) for box, values in buckets.items()},
            {box: frozenset(values) for box, values in keys.items()},
        )

    def box_paused(self, box: str) -> bool:
        return box in self.boxes

    def paused_buckets(self, box: str) -> frozenset[int]:
        return self.buckets.get(box, frozenset())

    def paused_keys(self, box: str) -> frozenset[str]:
        return self.keys.get(box, frozenset())


class PauseReader:
    """The pauses as a worker sees them: re-read at most every `refresh_seconds`.

    If the table cannot be read (database down, revision 0002 not applied) the last known
    pauses stay in force and the failure is logged; the lanes' own queries report the outage.
    """

    def __init__(self, engine: AsyncEngine, refresh_seconds: float = 2.0) -> None:
        self._engine = engine
        self._refresh = refresh_seconds
        self._current = PauseSet()
        self._read_at = float("-inf")
        self._lock = asyncio.Lock()
        self._failing = False

    async def refresh(self) -> PauseSet:
        """Read the pauses now, whatever the last read's age."""
        async with self._lock:
            await self._read()
        return self._current

    async def current(self) -> PauseSet:
        if time.monotonic() - self._read_at < self._refresh:
            return self._current
        async with self._lock:
            if time.monotonic() - self._read_at >= self._refresh:
                await self._read()
        return self._current

    async def _read(self) -> None:
        try:
            pauses = await list_pauses(self._engine)
        except Exception as exc:
            if not self._failing:
                log.warning("cannot read the pauses (%s); keeping the last known ones", exc)
            self._failing = True
        else:
            if self._failing:
                log.info("pauses readable again")
            self._failing = False
            fresh = PauseSet.of(pauses)
            if fresh != self._current:
                log.info(
                    "pauses now: boxes %s, buckets %s, keys %s",
                    sorted(fresh.boxes),
                    {b: sorted(v) for b, v in fresh.buckets.items()},
                    {b: len(v) for b, v in fresh.keys.items()},
                )
            self._current = fresh
        # A failed read is retried after the same interval, not on every lane's next loop.
        self._read_at = time.monotonic()
