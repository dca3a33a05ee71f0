"""Work sharing through PostgreSQL advisory locks (no Redis, no lease table).

Each worker process keeps one dedicated connection. On it, per box, it holds a "member"
lock (so every worker can count the live ones in `pg_locks`) and one lock per bucket it
owns. A worker that dies, even by SIGKILL, loses its connection and with it every lock, so
the survivors see fewer members at their next rebalance (every second) and take its buckets.
A bucket changes hands only between batches: the owner finishes (or abandons) its current
batch before it unlocks.

Membership changes are also announced on `REBALANCE_CHANNEL`: a worker that joins, gives
buckets back or leaves cleanly sends a NOTIFY there, and every worker rebalances at once
instead of at its next tick. Scaling out or a rolling restart hands buckets over in
milliseconds, not in one or two rebalance intervals; a SIGKILLed worker still waits for the
tick (it cannot say goodbye).

Losing the lock connection (the server terminated it: a pooler or failover, an idle or TCP
timeout) frees every lock at once, and another worker may take the buckets a millisecond
later. So the worker forgets its buckets the moment asyncpg reports the connection closed
(a termination listener), before anything else runs: no lane starts a batch for a bucket it
no longer owns. A batch already in flight may still finish; its outcomes are fenced (see
record.py) and an inbox handler runs only on a row it locked (see processor.py). Every
statement on the lock connection has a timeout, so a connection that silently stopped
answering is noticed too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg  # type: ignore[import-untyped]

from outbox_engine.config.registry import Box

log = logging.getLogger(__name__)

MEMBER_BASE = 1_000_000
REBALANCE_CHANNEL = "outbox_workers_rebalance"
NOTIFY_REBALANCE = f"SELECT pg_notify('{REBALANCE_CHANNEL}', '')"
MAX_MEMBERS = 4096
# A statement on the lock connection that takes longer means the connection is not usable.
LOCK_STATEMENT_TIMEOUT = 10.0

# The granted two-key advisory locks (bucket and member locks) of this database whose
# namespaces are in $1.
_GRANTED_LOCKS = """
FROM pg_locks
WHERE locktype = 'advisory' AND granted AND objsubid = 2
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND classid = ANY($1::bigint[]::oid[])
"""
# One row a lock (a joining worker reads which member slots are taken).
ALL_LOCKS_SQL = f"SELECT classid::bigint AS ns, objid::bigint AS key2 {_GRANTED_LOCKS}"
# Per box namespace in $1, one row: how many workers hold its member lock (this one
# included) and which buckets other sessions hold. The rebalance tick runs it every second
# for all boxes: one row a box rather than one a lock (10 boxes of 64 buckets were 650 rows
# a tick, sorted out in Python: about 40% of an idle worker's CPU).
LOCK_SUMMARY_SQL = f"""
SELECT classid::bigint AS ns,
       count(*) FILTER (WHERE objid::bigint >= {MEMBER_BASE}) AS members,
       coalesce(
           array_agg(objid::bigint)
               FILTER (WHERE objid::bigint < {MEMBER_BASE} AND pid <> pg_backend_pid()),
           ARRAY[]::bigint[]
       ) AS elsewhere
{_GRANTED_LOCKS}
GROUP BY classid
"""


async def try_lock_bucket(conn: Any, namespace: int, bucket: int) -> bool:
    """Take the advisory lock of one bucket on this session if it is free (never waits)."""
    return bool(await conn.fetchval("SELECT pg_try_advisory_lock($1, $2)", namespace, bucket))


async def unlock_bucket(conn: Any, namespace: int, bucket: int) -> None:
    """Release the advisory lock of one bucket held by this session."""
    await conn.execute("SELECT pg_advisory_unlock($1, $2)", namespace, bucket)


@dataclass
class BoxOwnership:
    box: Box
    lanes: int
    owned: set[int] = field(default_factory=set)
    member_slot: int | None = None
    lane_locks: list[asyncio.Lock] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lane_locks = [asyncio.Lock() for _ in range(self.lanes)]

    def lane_buckets(self, lane: int) -> list[int]:
        return sorted(b for b in self.owned if b % self.lanes == lane)

    def buckets_of(self, lanes: tuple[int, ...]) -> list[int]:
        """The owned buckets of these lanes, in order (every owned one for every lane)."""
        if len(lanes) == 1:
            return self.lane_buckets(lanes[0])
        return sorted(b for b in self.owned if b % self.lanes in lanes)


class Ownership:
    def __init__(
        self,
        dsn: str,
        boxes: list[Box],
        lanes: int,
        application_name: str,
        on_wake: Callable[[str, str], None],
        on_members_changed: Callable[[], None] = lambda: None,
        on_lost: Callable[[], None] = lambda: None,
    ) -> None:
        self._dsn = dsn
        self._app = application_name
        self._on_wake = on_wake
        self._on_members_changed = on_members_changed
        self._on_lost = on_lost
        # How often the lock connection was lost (tests and logs read it).
        self.losses = 0
        self.boxes = {box.name: BoxOwnership(box, lanes) for box in boxes}
        self._conn: asyncpg.Connection | None = None

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    async def connect(self) -> None:
        conn = await asyncpg.connect(
            self._dsn,
            server_settings={"application_name": self._app},
            timeout=LOCK_STATEMENT_TIMEOUT,
            command_timeout=LOCK_STATEMENT_TIMEOUT,
        )
        self._conn = conn
        conn.add_termination_listener(self._terminated)
        for state in self.boxes.values():
            state.owned.clear()
            state.member_slot = None
            await conn.add_listener(state.box.channel, self._notified)
            await self._join(conn, state)
        await conn.add_listener(REBALANCE_CHANNEL, self._members_changed)
        await conn.execute(NOTIFY_REBALANCE)  # the others give this worker its share now

    def _terminated(self, conn: object) -> None:
        """asyncpg saw the lock connection close. Unless we closed it, every lock is gone:
        forget the buckets now, so that no lane starts another batch for them."""
        if conn is not self._conn:
            return  # closed on purpose (close() clears _conn first)
        self._conn = None
        self.losses += 1
        owned = sum(len(state.owned) for state in self.boxes.values())
        self.drop_all()
        log.warning(
            "lock connection lost: %d buckets given up at once; no batch starts until the "
            "worker has reconnected and taken buckets again",
            owned,
        )
        self._on_lost()

    def _members_changed(self, _conn: object, _pid: int, _channel: str, _payload: object) -> None:
        self._on_members_changed()

    def _notified(self, _conn: object, _pid: int, channel: str, payload: object) -> None:
        self._on_wake(channel, payload if isinstance(payload, str) else "")

    async def _join(self, conn: asyncpg.Connection, state: BoxOwnership) -> None:
        ns = state.box.lock_namespace
        rows = await conn.fetch(ALL_LOCKS_SQL, [ns])
        taken = {r["key2"] - MEMBER_BASE for r in rows if r["key2"] >= MEMBER_BASE}
        for slot in range(MAX_MEMBERS):
            if slot in taken:
                continue
            if await conn.fetchval("SELECT pg_try_advisory_lock($1, $2)", ns, MEMBER_BASE + slot):
                state.member_slot = slot
                return
        raise RuntimeError(f"box {state.box.name}: more than {MAX_MEMBERS} workers")

    async def rebalance(self) -> None:
        """Take or give back buckets so that every live worker holds about its share."""
        conn = self._conn
        if conn is None:
            return
        spaces = [state.box.lock_namespace for state in self.boxes.values()]
        summary = {r["ns"]: r for r in await conn.fetch(LOCK_SUMMARY_SQL, spaces)}
        for state in self.boxes.values():
            box = state.box
            ns = box.lock_namespace
            row = summary.get(ns)
            members = (row["members"] if row is not None else 0) or 1
            held_elsewhere = set(row["elsewhere"]) if row is not None else set()
            target = math.ceil(box.config.bucket_count / members)
            if len(state.owned) > target:
                extra = random.sample(sorted(state.owned), len(state.owned) - target)
                for bucket in extra:
                    async with state.lane_locks[bucket % state.lanes]:
                        state.owned.discard(bucket)
                        await unlock_bucket(conn, ns, bucket)
                await conn.execute(NOTIFY_REBALANCE)  # free now: whoever wants them, take them
                log.info("box %s: released %d buckets (%d workers)", box.name, len(extra), members)
            elif len(state.owned) < target:
                free = [
                    b
                    for b in range(box.config.bucket_count)
                    if b not in state.owned and b not in held_elsewhere
                ]
                random.shuffle(free)
                gained = 0
                for bucket in free:
                    if len(state.owned) >= target:
                        break
                    if await try_lock_bucket(conn, ns, bucket):
                        state.owned.add(bucket)
                        gained += 1
                if gained:
                    log.info(
                        "box %s: took %d buckets, owns %d of %d (%d workers)",
                        box.name,
                        gained,
                        len(state.owned),
                        box.config.bucket_count,
                        members,
                    )
                    self._on_wake(box.channel, "")

    def drop_all(self) -> None:
        """Forget every bucket at once (the lock connection is gone, so are the locks)."""
        for state in self.boxes.values():
            state.owned.clear()
            state.member_slot = None

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        self.drop_all()
        if conn is not None and not conn.is_closed():
            # Leaving: free the buckets first, then tell the others to take them.
            with contextlib.suppress(
                OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError
            ):
                await asyncio.wait_for(
                    conn.execute(f"SELECT pg_advisory_unlock_all(); {NOTIFY_REBALANCE}"), 5
                )
            try:
                await asyncio.wait_for(conn.close(), 5)
            except (OSError, asyncpg.PostgresError, TimeoutError):
                conn.terminate()
