"""What happens right before every timed run: the run's database vacuumed and analysed,
PostgreSQL checkpointed, the machine quiet.

Reason: the run database is a fresh copy of a template (`CREATE DATABASE ... TEMPLATE`
writes the whole copy to the WAL in PostgreSQL 15), and its tables have no visibility map
or statistics of their own. Left alone, a checkpoint, autovacuum or the plan of an
unanalysed table lands inside whichever run comes next, and that is the variance the ratios
showed. Doing the work before the clock starts makes every system start from the same
state. The quiet-start rule applies to every run: the CPU less than QUIET_ACTIVE_PCT active
over QUIET_WINDOW_S (bench/machine.py `wait_for_quiet` says why not the load average), a
bounded wait. What was measured is recorded with the run's result, so a noisy repeat can be
seen; the 1-minute load average beside it, for the record only.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from . import machine
from .pg import Postgres

# Quiet: every core together less than 10% active (I/O wait counted) over 2 s. The machine
# between runs, with PostgreSQL, the broker and Kafka Connect idle, measured 0-3.5% (the
# second before 174 starts, 2026-12-06); a timed run keeps it at 55-95%.
QUIET_ACTIVE_PCT = 10.0
QUIET_WINDOW_S = 2.0


def settle_database(pg: Postgres, database: str) -> dict[str, Any]:
    """`VACUUM (ANALYZE)` the database's tables, then `CHECKPOINT`. Recorded from
    PostgreSQL's side: `checkpoint` 1 if the control file's checkpoint location moved,
    `vacuum_analyze` 1 if every user table has a manual vacuum and analyze on record."""
    started = time.monotonic()
    tables, settled, moved = asyncio.run(pg.settle(database))
    return {
        "vacuum_analyze": int(settled == tables),
        "tables_vacuumed": settled,
        "tables": tables,
        "checkpoint": int(moved),
        "settle_s": time.monotonic() - started,
    }


def settle(pg: Postgres, database: str, max_wait_s: float) -> dict[str, Any]:
    """Everything before a timed run; the returned record goes into the run's result."""
    record = settle_database(pg, database)
    quiet, active, waited = machine.wait_for_quiet(QUIET_ACTIVE_PCT, QUIET_WINDOW_S, max_wait_s)
    record.update(
        quiet=quiet,
        cpu_active_pct=active,
        quiet_wait_s=waited,
        load1=machine.load1(),
    )
    return record
