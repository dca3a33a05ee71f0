"""Cost as the table grows: the 100k backlog drained by one relay process while the outbox
table already holds N delivered rows awaiting retention (cases 0, 1M and 5M), and once more
while retention purges N expired rows.

Each size is a template of its own, built once per run on first use: the system's empty
schema, N delivered rows written by SQL (created two hours ago, ~`size`-byte payloads,
keys spread like the backlog's, message ids of the kind the system's own writer makes:
ours UUID version 7 from their creation time, the baseline random ones, as its `uuid4()`),
then the backlog through the system's own create API, so the delivered history has the
lower ids (and ours the older message ids) as it would in service. The run database is a
FILE_COPY of it (a 5M-row table is ~6 GB; a WAL-logged copy would be written twice), then
settled like every run. Case 0 uses the same drain on the plain backlog, copied the same
way, so the ratios within the scenario compare like with like.

- **Kept** rows (the bake's `retention.delivered` is P1D): the drain as in the drain
  scenario; the rate at N rows against the rate at 0 rows of the same system and repeat.
- **Purging**: the same N rows, expired: ours runs with a copy of its boxes file whose
  outbox box keeps delivered rows for PT1H and runs retention every 0.1 s (the worker's
  own retention loop, batches of `retention.batch_size`); the baseline runs its `purge`
  (id-ordered batches of 1,000) beside its relay. Purged rows are counted from the table.
- **The claim's plan** (ours): `EXPLAIN (ANALYZE, BUFFERS)` of the engine's own claim
  statement (printed by the bake's venv) on the run database before the drain, for all of
  the box's buckets, once with the relay's session settings and the generic plan its
  prepared statement ends up with, once with the server's defaults; both must be index
  range scans of the pending rows' partial index, never a scan of the table.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from . import procs, scenarios
from .context import Context, built_template
from .sizes import Sizes
from .systems import System, ours_worker_or_baseline

Case = dict[str, Any]
AGE = "2 hours"  # of the delivered rows: kept under P1D, expired under PT1H
PURGE_KEEP = "PT1H"
PURGE_KEEP_S = 3600.0
FILL_CHUNK = 500_000
DELIVERED = 2  # the delivered status of both systems' tables

FILLER = """
INSERT INTO @table (uuid, @extra_columnsevent_key, bucket, status, payload, created_at,
                    processed_at)
SELECT @uuid, @extra_values(g % $3)::text, (g % 16)::int, @delivered,
       convert_to('{"bench_filler":' || g || ',"pad":"' || repeat('x', $4) || '"}', 'UTF8'),
       now() - interval '@age', now() - interval '@age'
FROM generate_series($1::bigint, $2::bigint) AS g
"""
# Ours' create() makes UUID version 7 ids (outbox_engine.creation.ids): 48 bits of the Unix
# millisecond, version 7, 12 random bits, the RFC variant, 62 random bits. Rows written two
# hours ago, 1,000 to a millisecond, as its create_batch would have made them.
UUID7 = (
    "(lpad(to_hex((extract(epoch FROM now() - interval '@age') * 1000)::bigint + g / 1000), 12, "
    "'0') || '7' || substr(md5(random()::text), 1, 3) || "
    "substr('89ab', 1 + floor(random() * 4)::int, 1) || substr(md5(random()::text), 1, 15))::uuid"
)
RANDOM_UUID = "gen_random_uuid()"

# The engine's own claim statement and the relay's session settings, printed by the bake's
# venv: the plan shown is the one the relay's sessions get, whatever the engine sets.
CLAIM_SQL = """
import json, sys
from outbox_engine.relay.processor import RELAY_SESSION_SETTINGS
from outbox_engine.store.items import ItemReads

table, strict = sys.argv[1], sys.argv[2] == "true"
# (The claim's text does not depend on the key index's kind: that is the look-ups'.)
reads = ItemReads(
    table, inbox=False, strict_order=strict, object_header="", delivered_key_index=False
)
claim = reads.claim_sql
print(json.dumps({"sql": claim, "settings": RELAY_SESSION_SETTINGS}))
"""


def cases(sizes: Sizes) -> list[Case]:
    kept = [{"rows": rows, "purging": False} for rows in sizes.growth_rows]
    return [*kept, {"rows": sizes.growth_purge_rows, "purging": True}]


def label(case: Case) -> str:
    rows: int = case["rows"]
    size = f"{rows // 1_000_000}M" if rows and rows % 1_000_000 == 0 else f"{rows // 1000}k"
    return ("0" if not rows else size) + (" purging" if case["purging"] else "")


def applies(system: System, case: Case) -> bool:
    # The peers drain at a few percent of our rate (section 1) and have no retention.
    return ours_worker_or_baseline(system)


def prepare(ctx: Context, system: System, case: Case) -> str:
    """The case's template kind: the plain backlog at 0 rows, else its own (built once)."""
    rows: int = case["rows"]
    if not rows:
        return "backlog"

    def fill(database: str) -> None:
        extra = system.project is not None  # ours has an event_name column
        statement = FILLER
        for name, value in (
            ("@uuid", UUID7 if extra else RANDOM_UUID),
            ("@table", system.outbox_table()),
            ("@extra_columns", "event_name, " if extra else ""),
            ("@extra_values", "'bench_event', " if extra else ""),
            ("@delivered", str(DELIVERED)),
            ("@age", AGE),
        ):
            statement = statement.replace(name, value)
        pad = max(ctx.size - 40, 0)
        for first in range(0, rows, FILL_CHUNK):
            last = min(first + FILL_CHUNK, rows) - 1
            ctx.pg.fetch(database, statement, first, last, ctx.keys, pad)
        procs.run(
            system.fill_cmd(ctx.backlog, ctx.keys, ctx.size),
            procs.base_env(**system.env(ctx.pg.url(database))),
            ctx.logs / f"{system.name}-grown-fill.log",
            ctx.logs,
            timeout=3600,
        )

    what = f"{rows:,} delivered rows and the {ctx.backlog:,}-item backlog"
    return built_template(ctx, system, f"grown{rows}", fill, what)


def purging_boxes_file(system: System, workdir: Path) -> Path:
    """The bake's config/boxes.yaml with its outbox box keeping delivered rows for PT1H and
    running retention every 0.1 s."""
    assert system.project is not None
    raw = yaml.safe_load((system.project.root / "config" / "boxes.yaml").read_text())
    entry = raw["outbox"][system.project.outbox_box]
    entry["retention"] = {**entry.get("retention", {}), "delivered": PURGE_KEEP}
    # The loop sleeps its interval before its first run: 0.1 s starts it while the worker
    # is still starting up, before the first message is relayed.
    entry["retention"]["interval_seconds"] = 0.1
    path = workdir / "boxes-growth-purging.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _expired(ctx: Context, run_db: str, system: System) -> tuple[int, int]:
    """(count, highest id) of the delivered rows past retention before the drain: the rows
    the template loaded, which take the lower ids. Counted by id afterwards (`_left`): by
    status and age, backlog rows delivered during the drain count too once the template is
    older than the retention period (a run's later repeats), and the count went negative."""
    row = ctx.pg.fetchrow(
        run_db,
        f"SELECT count(*), coalesce(max(id), 0) FROM {system.outbox_table()} "
        f"WHERE status = {DELIVERED} AND created_at < now() - make_interval(secs => $1)",
        PURGE_KEEP_S,
    )
    return int(row[0]), int(row[1])


def _left(ctx: Context, run_db: str, system: System, highest: int) -> int:
    """How many of the rows `_expired` counted are still in the table."""
    row = ctx.pg.fetchrow(
        run_db, f"SELECT count(*) FROM {system.outbox_table()} WHERE id <= $1", highest
    )
    return int(row[0])


def claim_plans(ctx: Context, system: System, run_db: str) -> dict[str, Any]:
    """The engine's claim over all of the box's buckets, explained twice (see the module
    docstring); `range_scan` is whether both read the pending rows' partial index and no
    plan scans the table."""
    assert system.project is not None
    boxes = yaml.safe_load((system.project.root / "config" / "boxes.yaml").read_text())
    box = boxes["outbox"][system.project.outbox_box]
    table = system.outbox_table()
    strict = "true" if box.get("strict_order", True) else "false"
    printed = json.loads(
        subprocess.run(
            [str(system.project.python), "-c", CLAIM_SQL, table, strict],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
    )
    sql: str = printed["sql"]
    settings: dict[str, str] = printed["settings"]
    buckets = list(range(int(box.get("bucket_count", 16))))
    limit = int(box.get("batch_size", 500))
    per_bucket = min(limit, max(8, math.ceil(limit / len(buckets)) * 4))
    explain = "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) "
    generic = _explain_generic(ctx, run_db, sql, settings, buckets, per_bucket, limit)
    default = [r[0] for r in ctx.pg.fetch(run_db, explain + sql, buckets, per_bucket, limit, [])]
    pending = f"ix_{table}_pending"

    def range_scan(plan: list[str]) -> bool:
        text = "\n".join(plan)
        return pending in text and f"Seq Scan on {table}" not in text

    return {
        "plan": generic,
        "plan_default": default,
        "range_scan": range_scan(generic) and range_scan(default),
    }


def _explain_generic(
    ctx: Context,
    run_db: str,
    sql: str,
    settings: dict[str, str],
    buckets: list[int],
    per_bucket: int,
    limit: int,
) -> list[str]:
    """The plan the relay's prepared claim runs with: its session settings (sequential and
    bitmap scans off), the generic plan forced, parameters bound at EXECUTE."""
    statements = (
        *(f"SET {name} = {value}" for name, value in settings.items()),
        "SET plan_cache_mode = force_generic_plan",
        f"PREPARE bench_claim AS {sql}",
    )
    array = "'{" + ",".join(map(str, buckets)) + "}'::integer[]"
    execute = (
        "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) "
        f"EXECUTE bench_claim({array}, {per_bucket}, {limit}, ARRAY[]::text[])"
    )
    rows = ctx.pg.fetch(run_db, execute, before=statements)
    return [r[0] for r in rows]


def growth(ctx: Context, system: System, run_db: str, sizes: Sizes, case: Case) -> dict[str, Any]:
    rows: int = case["rows"]
    purging: bool = case["purging"]
    plans = claim_plans(ctx, system, run_db) if system.project is not None else {}
    env_extra: dict[str, str] = {}
    purger = None
    before, highest = _expired(ctx, run_db, system)  # the template's delivered rows
    if purging and system.project is not None:
        env_extra["BOXES_FILE"] = str(purging_boxes_file(system, ctx.logs))
    elif purging:
        purger = procs.Child(
            [*system.driver_cmd("purge"), "--seconds", str(PURGE_KEEP_S)],
            procs.base_env(**system.env(ctx.pg.url(run_db))),
            ctx.logs / f"{system.name}-growth-purge.log",
            ctx.logs,
        )
    started = time.monotonic()
    try:
        result = scenarios.drain(ctx, system, run_db, sizes, {"workers": 1}, env_extra)
    finally:
        elapsed = time.monotonic() - started
        if purger is not None:
            if not purger.alive():
                raise RuntimeError(f"the baseline's purge exited early: {purger.tail(10)}")
            purger.stop()
    purged = before - _left(ctx, run_db, system, highest)
    result.update(
        rows=rows,
        rows_before=before,
        purging=purging,
        purged=purged,
        # Over the relay process's whole life (start-up and stop included).
        purged_per_s=purged / elapsed if purging and elapsed > 0 else None,
        **plans,
    )
    return result
