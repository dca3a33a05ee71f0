"""What happens right before every timed run: the run's database vacuumed and analysed,
PostgreSQL checkpointed, the machine quiet.

Reason: the run database is a fresh copy of a template (`CREATE DATABASE ... TEMPLATE`
writes the whole copy to the WAL in PostgreSQL 15), and its tables have no visibility map
or statistics of their own. Left alone, a checkpoint, autovacuum or the plan of an
unanalysed table lands inside whichever run comes next, and that is the variance the ratios
showed. Doing the work before the clock starts makes every system start from the same
state. The quiet-start rule (1-minute load < 1.0, bounded wait) applies to every run, and
what was measured is recorded with the run's result, so a noisy repeat can be seen.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from . import machine
from .pg import Postgres

QUIET_LOAD = 1.0


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
    quiet, load, waited = machine.wait_for_quiet(QUIET_LOAD, max_wait_s)
    record.update(
        quiet=quiet,
        load1=load,
        quiet_wait_s=waited,
        cpu_busy_pct=machine.cpu_busy_pct(1.0),
    )
    return record
