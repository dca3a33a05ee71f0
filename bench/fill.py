"""Before the repeats: every system's template databases filled (in parallel, through each
system's own create API), then settled once (VACUUM (ANALYZE), CHECKPOINT) so that the
fill's leftovers (dirty pages, autovacuum of freshly loaded tables) are gone before the
first timed run instead of landing on whichever system runs first."""

from __future__ import annotations

import time

from .context import Context, prepare_templates
from .envs import log
from .settle import settle_database
from .systems import System


def fill_templates(ctx: Context, systems: list[System], backlog: int) -> dict[str, float]:
    """Fill every system's templates; seconds until each fill was done."""
    fills = [(s, prepare_templates(ctx, s, backlog)) for s in systems]
    seconds: dict[str, float] = {}
    started = time.monotonic()
    pending = [(s, c) for s, c in fills if c is not None]
    while pending:  # note each fill's end (they run in parallel, sharing the CPUs)
        for system, child in list(pending):
            if child.alive():
                continue
            if child.stop() != 0:
                raise RuntimeError(f"filling {system.name} failed:\n{child.tail()}")
            seconds[system.name] = time.monotonic() - started
            pending.remove((system, child))
        time.sleep(0.5)
    for system in systems:
        for kind in ("empty", "backlog"):
            record = settle_database(ctx.pg, ctx.database(system, kind))
            if not (record["checkpoint"] and record["vacuum_analyze"]):
                raise RuntimeError(f"settling {ctx.database(system, kind)} failed: {record}")
    log("templates filled and settled (VACUUM (ANALYZE), CHECKPOINT)")
    return seconds
