"""Connections the server terminates (`pg_terminate_backend`) while the process that owns
them lives on: what a pooler restart, an idle-session or TCP timeout or a failover does to a
service in production.

* `lock_connection_killed`: the one connection on which a worker holds its advisory locks
  (its member lock and one per bucket it owns). Its locks go with it, so another worker may
  take the buckets a moment later while the first one still has batches in flight: the
  outcomes of those batches must be fenced, and no inbox handler may run twice. Each strike
  waits until the worker has just run its own statements on that connection (a rebalance)
  and then stayed quiet for 0.1 s: a worker that only checks its connection now and then
  takes longest to notice the loss when it is struck then.
* `connection_killed`: one busy connection of a worker and one of a consumer, other than the
  lock connection (a claim, a record, a handler's transaction, an insert of the consumer).

Both strike three times, a few seconds apart, while both boxes are under load, and record
in `run.facts` how many terminations hit and how many of them hit a busy connection, so a
scenario can fail when the fault did not land (see `landed`).

A worker's lock connection is found in `pg_locks` (session advisory locks in this run's
database) and matched to the worker process by the process id that ends its
`application_name` (see outbox_engine/relay/worker.py). The other connections of a process carry the
name `labelled(<process>)` sets (see labelled_connections/sitecustomize.py).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text

from outbox_engine.store.ownership import MEMBER_BASE
from outbox_engine.store.status import ItemStatus

from ..support import InboxItem
from .faults import Fault
from .queries import count, wait_until
from .report import Row
from .scenarios import Run
from .transports import EFFECTS_TABLE

LABELLED_CONNECTIONS = Path(__file__).resolve().parent / "labelled_connections"
LABEL_PREFIX = "guarantees:"

# Backends of this database that hold advisory locks of the two-key form, with how many of
# those are bucket locks (the member locks are numbered from MEMBER_BASE up).
LOCK_HOLDERS = text(
    """
    SELECT a.pid, a.application_name,
           count(*) FILTER (WHERE l.objid::bigint < :member_base) AS buckets
    FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    GROUP BY a.pid, a.application_name
    """
)
# One process's labelled connections, busiest first: running a statement, then inside a
# transaction, then idle.
LABELLED = text(
    """
    SELECT pid, state FROM pg_stat_activity
    WHERE datname = current_database() AND application_name = :name
    ORDER BY CASE state WHEN 'active' THEN 0 WHEN 'idle in transaction' THEN 1 ELSE 2 END,
             state_change
    """
)
STATEMENT_STARTED = text("SELECT query_start, state FROM pg_stat_activity WHERE pid = :pid")
TERMINATE = text("SELECT pg_terminate_backend(:pid)")
DOUBLED = text(f"SELECT count(*) - count(DISTINCT message_id) FROM {EFFECTS_TABLE}")
BUSY = ("active", "idle in transaction")


def labelled(names: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """Per-process environment (Scenario.worker_env) that names each process's connections
    `guarantees:<process>`."""
    path = os.pathsep.join(filter(None, [str(LABELLED_CONNECTIONS), os.environ.get("PYTHONPATH")]))
    return {
        name: {"PYTHONPATH": path, "GUARANTEES_APPLICATION_NAME": f"{LABEL_PREFIX}{name}"}
        for name in names
    }


@dataclass(frozen=True)
class Target:
    backend: int
    state: str  # pg_stat_activity.state when it was picked
    buckets: int = 0  # bucket locks it held (lock connections)


async def _terminate(run: Run, target: Target) -> bool:
    async with run.container.engine().connect() as conn:
        return bool((await conn.execute(TERMINATE, {"pid": target.backend})).scalar_one())


async def _inbox_pending(run: Run) -> int:
    return await count(run.container, InboxItem, InboxItem.status == int(ItemStatus.PENDING))


async def _doubled(run: Run) -> int:
    """Inbox effects beyond one per message so far (the audit counts them at the end; this
    says after which termination they appeared)."""
    async with run.container.engine().connect() as conn:
        return int((await conn.execute(DOUBLED)).scalar_one())


async def inbox_in_flight(run: Run, at_least: int, within: float = 60.0) -> bool:
    """Wait until the inbox has `at_least` pending rows: the handlers have work to be cut off.
    False if it had not within `within` seconds."""

    async def enough() -> bool:
        return await _inbox_pending(run) >= at_least

    return await wait_until(enough, within=within, interval=0.1)


async def _pending_now_or_soon(run: Run, within: float = 10.0) -> int:
    """Inbox rows pending now; if none, wait up to `within` seconds for the load's next chunk.
    On a fast machine the handlers drain a chunk before the next one lands, so a strike timed
    by the worker's own statements can fall in the gap with nothing in flight: the strike
    then waits for work instead of landing where it tests nothing."""
    pending = await _inbox_pending(run)
    if pending == 0 and await inbox_in_flight(run, 1, within=within):
        pending = await _inbox_pending(run)
    return pending


async def lock_connection(run: Run, process: str, within: float = 30.0) -> Target | str:
    """The backend on which `process` (a worker) holds its bucket locks, once it holds any;
    else why there is none to strike."""
    popen = run.stack.processes[process].popen
    assert popen is not None, f"{process} was never started"
    suffix = f":{popen.pid}"
    deadline = time.monotonic() + within
    seen: list[str] = []
    while time.monotonic() < deadline:
        async with run.container.engine().connect() as conn:
            rows = (await conn.execute(LOCK_HOLDERS, {"member_base": MEMBER_BASE})).all()
        seen = [f"{row.application_name} ({row.buckets} buckets)" for row in rows]
        for row in rows:
            if str(row.application_name).endswith(suffix) and row.buckets > 0:
                return Target(int(row.pid), "lock", int(row.buckets))
        await asyncio.sleep(0.1)
    return (
        f"no lock connection of {process} (pid {popen.pid}) holding buckets within {within:.0f}s;"
        f" lock holders: {', '.join(seen) or 'none'}"
    )


async def busy_connection(
    run: Run, process: str, within: float = 10.0, appear_within: float = 30.0
) -> Target | str:
    """One of `process`'s labelled connections: a busy one if one shows up within `within`
    seconds (polled every 10 ms) of the first one seen, else the least idle one; else why
    there is none to strike. A consumer opens its first connection only once Kafka has
    assigned it partitions (again after a restart), so the first one may take up to
    `appear_within` seconds."""
    name = f"{LABEL_PREFIX}{process}"
    deadline = time.monotonic() + appear_within
    fallback: Target | None = None
    while True:
        async with run.container.engine().connect() as conn:
            rows = (await conn.execute(LABELLED, {"name": name})).all()
        if rows:
            first = Target(int(rows[0].pid), str(rows[0].state))
            if first.state in BUSY:
                return first
            if fallback is None:
                deadline = time.monotonic() + within
            fallback = first
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.01)
    if fallback is None:
        exits = run.stack.processes[process].exit_codes
        return (
            f"{process} had no connection named {name!r} for {appear_within:.0f}s (exit codes so"
            f" far {exits}; was it started with labelled()?)"
        )
    return fallback


async def after_its_next_statements(
    run: Run, target: Target, quiet: float = 0.1, within: float = 3.0
) -> bool:
    """Return once `target` has run statements again and then stayed idle for `quiet`
    seconds (polled every 10 ms), or after `within` seconds; True if it did. A worker checks
    its lock connection with a few statements now and then (a rebalance), so just after
    such a round is when it would take longest to notice that the connection is gone: the
    worst moment, the one the fault picks."""
    deadline = time.monotonic() + within
    first = last = None
    changed_at = 0.0
    while time.monotonic() < deadline:
        async with run.container.engine().connect() as conn:
            row = (await conn.execute(STATEMENT_STARTED, {"pid": target.backend})).first()
        if row is None:
            return False
        now = time.monotonic()
        if first is None:
            first = last = row.query_start
        elif row.query_start != last:
            last, changed_at = row.query_start, now
        elif last != first and row.state == "idle" and now - changed_at >= quiet:
            return True
        await asyncio.sleep(0.01)
    return False


def _record(run: Run, what: str, target: Target, terminated: bool) -> None:
    run.facts[f"{what}_terminated"] = run.facts.get(f"{what}_terminated", 0) + int(terminated)
    busy = terminated and target.state in (*BUSY, "lock")
    run.facts[f"{what}_busy"] = run.facts.get(f"{what}_busy", 0) + int(busy)


def _lines_about_lock_connection(run: Run, process: str) -> int:
    """How many lines of the process's log (the suite runs it at WARNING) mention its lock
    connection: a worker that lost it should say so."""
    try:
        log = run.stack.processes[process].log_path.read_text(errors="replace")
    except OSError:
        return 0
    return sum(1 for line in log.splitlines() if "lock connection" in line)


def lock_connection_killed(
    workers: tuple[str, ...] = ("worker-0", "worker-0", "worker-0"),
    pause: float = 2.0,
    inbox_at_least: int = 2000,
) -> Fault:
    """`pg_terminate_backend` on the lock connection of each worker named, in turn, `pause`
    seconds apart, once `inbox_at_least` inbox rows are pending. Each time, the worker must
    have taken buckets again (on a new lock connection) before it is struck, and it is
    struck just after its next statements on that connection."""

    async def fault(run: Run) -> None:
        await inbox_in_flight(run, inbox_at_least)
        pending: list[int] = []
        buckets: list[int] = []
        timed = 0
        doubled: list[int] = []
        for process in workers:
            target = await lock_connection(run, process)
            if isinstance(target, str):
                run.notes.append(target)  # this strike did not land; `landed` says so
                continue
            for _ in range(5):  # a strike between chunks of the load waits for the next one
                quiet_after = await after_its_next_statements(run, target)
                now = await _inbox_pending(run)
                if now or not await inbox_in_flight(run, 1, within=10.0):
                    break
            timed += quiet_after
            pending.append(now)
            terminated = await _terminate(run, target)
            _record(run, "lock", target, terminated)
            buckets.append(target.buckets)
            await asyncio.sleep(pause)
            doubled.append(await _doubled(run))
        run.facts["inbox_pending_min"] = min(pending, default=0)
        said = {process: _lines_about_lock_connection(run, process) for process in set(workers)}
        run.notes.append(
            f"lock connection terminated: {', '.join(workers)} (holding {buckets} bucket locks,"
            f" {timed} just after the worker's own statements on it; inbox pending at each:"
            f" {pending}; double effects {pause:.0f}s after each: {doubled}; log lines"
            f" (warning and above) about the lock connection: {said})"
        )

    return fault


def connection_killed(
    processes: tuple[str, ...] = ("worker-0", "consumer-0"),
    rounds: int = 3,
    pause: float = 2.0,
    inbox_at_least: int = 2000,
) -> Fault:
    """Each round, `pg_terminate_backend` on one busy labelled connection of each process
    named (never a worker's lock connection: it keeps its own name); `rounds` rounds,
    `pause` seconds apart, starting once `inbox_at_least` inbox rows are pending. The
    processes must be started with `labelled(processes)` as their environment."""

    async def fault(run: Run) -> None:
        await inbox_in_flight(run, inbox_at_least)
        states: Counter[str] = Counter()
        pending: list[int] = []
        for _ in range(rounds):
            pending.append(await _pending_now_or_soon(run))
            for process in processes:
                target = await busy_connection(run, process)
                if isinstance(target, str):
                    run.notes.append(target)  # this strike did not land; `landed` says so
                    continue
                terminated = await _terminate(run, target)
                _record(run, process.split("-")[0], target, terminated)
                states[f"{process} {target.state}"] += int(terminated)
            await asyncio.sleep(pause)
        run.facts["inbox_pending_min"] = min(pending)
        run.notes.append(
            "connections terminated (process, state when struck): "
            + ", ".join(f"{what} x{n}" for what, n in sorted(states.items()))
            + f"; inbox pending at each round: {pending}"
        )

    return fault


def landed(*whats: str, times: int = 3) -> Callable[[Row], list[str]]:
    """A scenario check: each kind of connection named was terminated `times` times, at least
    once while busy (running a statement or in a transaction: a consumer's connection is busy
    only a few percent of the time, between Kafka fetches, so not every strike can catch it
    busy), and with inbox items pending (else the fault did not test what it says)."""

    def check(row: Row) -> list[str]:
        failures = []
        if row.facts.get("inbox_pending_min", 0) == 0:
            failures.append("a termination landed with no inbox item pending")
        for what in whats:
            hit = row.facts.get(f"{what}_terminated", 0)
            busy = row.facts.get(f"{what}_busy", 0)
            if hit < times * row.runs:
                failures.append(f"{what} connection terminated {hit} times, not {times}")
            elif busy < row.runs:
                failures.append(f"none of the {hit} {what} connections was busy when struck")
        return failures

    return check


def survived(row: Row) -> list[str]:
    """A scenario check: no service process exited on its own. A connection the server
    terminated is an error to retry on a new connection (the worker's lock connection
    included: it reconnects and takes buckets again), not a reason to exit."""
    if row.restarts:
        return [f"{row.restarts} service processes exited on their own (a connection drop)"]
    return []
