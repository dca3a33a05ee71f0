"""The paired steady scenario: ours and the raw baseline under the same paced load at the
same time, each with its own database, topic, relay and reader, so both meet the same state
of the machine. The figure it is for is the ratio of their p99s.

Why: in the steady scenario (bench/steady.py) the systems run one after the other, and a
30-s window's p99 is set by the few seconds in which the shared machine stalled or was busy
elsewhere; those land on whichever system was running. Ours / the baseline at 200/s spread
0.87-2.03x between the repeats of one run and 0.38-1.81x in the next day's, whose median
moved by 51%. Side by side, a stall delays both systems' items of that second and a busy
spell slows both, so the ratio keeps what the systems do differently.

What it costs: each system shares the cores with the other's load, relay and backends (the
machine carries both loads), so the absolute figures here are not the steady scenario's;
those stay in that scenario. The two loads start at one wall clock time (`--start-at`,
after both processes are set up) and commit at the same rate for the same time.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import procs
from .context import PARTITIONS, Context, ensure_templates
from .kafka_io import TopicReader
from .report_fmt import BASELINE, OURS
from .scenarios import Case, _stop_all
from .settle import settle_database
from .sizes import Sizes
from .steady import measured
from .systems import System

# The two loads' first commits further apart than this: not the same window (checks.py).
MAX_START_GAP_S = 1.0
# Seconds from starting both loads to their first transaction: imports and connections of
# the slower load process (ours', SQLAlchemy and the project: ~2 s here) with room to spare.
START_DELAY = 8.0


def applies(system: System, case: Case) -> bool:
    """Ours' worker only, paired with the baseline (which must be in the run)."""
    return system.name == OURS


@dataclass
class _Side:
    system: System
    env: dict[str, str]
    out: Path
    reader: TopicReader
    relay: procs.Child


def paired_steady(
    ctx: Context, system: System, run_db: str, sizes: Sizes, case: Case
) -> dict[str, Any]:
    """Ours on `run_db` (settled by the loop) and the baseline on a settled copy of its empty
    template, the same paced load on both at once. Ours' steady figures, with the baseline's
    under `partner` and the ratio of the p99s."""
    partner = ctx.systems.get(BASELINE)
    if partner is None:
        raise RuntimeError("the paired steady scenario needs the baseline in the run")
    ensure_templates(ctx, partner)
    partner_db = ctx.database(partner, "pair")
    ctx.pg.recreate(partner_db, template=ctx.database(partner, "empty"))
    try:
        settled = settle_database(ctx.pg, partner_db)
        result = _run(ctx, [(system, run_db), (partner, partner_db)], sizes, case["rate"])
    finally:
        ctx.pg.drop(partner_db)
    result["partner"][partner.name]["settle"] = settled
    return result


def _run(ctx: Context, pair: list[tuple[System, str]], sizes: Sizes, rate: int) -> dict[str, Any]:
    duration, warmup = sizes.duration, sizes.warmup
    per_tx = max(1, round(rate / sizes.tx_rate))
    tx_rate = rate / per_tx
    total = round(tx_rate * (duration + warmup)) * per_tx
    sides: list[_Side] = []
    try:
        for system, database in pair:
            topic = ctx.topic(f"pair-{system.name}-{rate}")
            reader = TopicReader(ctx.bootstrap, topic, PARTITIONS, total)
            reader.start()
            env = procs.base_env(**system.env(ctx.pg.url(database), topic))
            log = ctx.logs / f"{system.name}-pair-{rate}.log"
            relay = procs.Child(system.relay_cmd(topic), env, log, ctx.logs)
            out = ctx.logs / f"{system.name}-pair-{rate}-commits.json"
            sides.append(_Side(system, env, out, reader, relay))
        time.sleep(4.0)  # imports, connections, bucket ownership (as the steady scenario)
        start_at = time.time() + START_DELAY
        with ThreadPoolExecutor(len(sides)) as pool:
            loads = [
                pool.submit(_load, ctx, side, tx_rate, per_tx, duration + warmup, start_at, rate)
                for side in sides
            ]
            for load in loads:
                load.result()
        for side in sides:
            side.reader.wait(15.0)
    finally:
        problems = _stop_all([side.relay for side in sides])
    ours, theirs = (
        measured(side.system.name, rate, per_tx, tx_rate * warmup, side.out, side.reader.result)
        for side in sides
    )
    theirs.pop("latencies")  # the results files keep no item's latency (ours' go to plots)
    return {
        **ours,
        "start_gap_s": _start_gap(sides),
        "partner": {theirs["system"]: theirs},
        "p99_ratio": ours["p99"] / theirs["p99"] if theirs["p99"] else None,
        "problems": problems,
    }


def _load(
    ctx: Context,
    side: _Side,
    tx_rate: float,
    per_tx: int,
    seconds: float,
    start_at: float,
    rate: int,
) -> None:
    load = side.system.load_cmd(0, tx_rate, per_tx, seconds, ctx.keys, ctx.size, side.out)
    command = [*load, "--start-at", f"{start_at:.3f}"]
    procs.run(
        command,
        side.env,
        ctx.logs / f"{side.system.name}-pair-{rate}-load.log",
        ctx.logs,
        timeout=seconds * 20 + 120,
    )


def _start_gap(sides: list[_Side]) -> float:
    """Seconds between the two loads' first commits (they should start together: a gap of
    more than a fraction of a second means one process was not set up by `start_at`)."""
    firsts = [min(t for _, t in json.loads(side.out.read_text())["commits"]) for side in sides]
    return max(firsts) - min(firsts)
