"""The benchmark harness: `./bench/run.sh [--quick] [--repeats N] [--seed N]` (run.sh sets up
the venvs and services, then runs this module). See docs/benchmarks.md for what it measures.

This module only composes a run: systems (lineup), template databases (fill), the inbox
input, the one scenario loop (loop + registry), then the checks, the results files and,
for a full run, the report (docs)."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from . import checks, docs, machine, results_files
from .cli import parse_args, replay_command
from .context import Context
from .envs import cache_dir, log
from .fill import fill_templates
from .kafka_io import produce_inbox_input
from .lineup import build_systems
from .loop import Plan, run_plan, settle_counts
from .meta import metadata
from .order import new_seed
from .pg import Postgres
from .registry import BY_NAME, NAMES
from .sizes import FULL, QUICK
from .warmup import warm_broker, warm_broker_bulk


def _terminate(_signum: int, _frame: object) -> None:
    raise SystemExit(143)  # run the cleanup (databases, topics, temp dir) on SIGTERM


def main() -> int:
    signal.signal(signal.SIGTERM, _terminate)
    args = parse_args()
    sizes = QUICK if args.quick else FULL
    repeats = args.repeats or (1 if args.quick else 3)
    seed = args.seed if args.seed is not None else new_seed()
    log(f"seed {seed} (replay this run's order of systems with --seed {seed})")
    run_wait_s = args.quiet_wait if args.quiet_wait is not None else (0.0 if args.quick else 60.0)
    first_wait_s = 0.0 if args.quick else args.wait_quiet * 60
    bootstrap = os.environ["TEST_KAFKA_BOOTSTRAP_SERVERS"]
    pg = Postgres(os.environ["TEST_DATABASE_URL"])
    scenarios = [BY_NAME[name] for name in NAMES if name in args.selected]
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="outbox-bench-") as tmp:
        logs = Path(tmp) / "logs"
        logs.mkdir()
        systems = build_systems(args, Path(tmp) / "bake", {"KAFKA_BOOTSTRAP_SERVERS": bootstrap})
        ctx = Context(pg, bootstrap, logs, sizes.keys, sizes.size, backlog=sizes.backlog)
        try:
            log(f"systems: {', '.join(s.name for s in systems)}; filling template databases")
            fill_seconds = fill_templates(ctx, systems, sizes.backlog)
            if "inbox" in args.selected:
                ctx.inbox_topic = ctx.topic("inbox-input")
                ctx.inbox_sent = produce_inbox_input(
                    bootstrap,
                    ctx.inbox_topic,
                    sizes.inbox_distinct,
                    sizes.inbox_duplicates,
                    sizes.keys,
                    sizes.size,
                )
            # Untimed: the first run after the services start paid for the broker's warm-up,
            # of its bulk path (drains) and of its path of small requests (steady loads).
            bulk = warm_broker_bulk(ctx, *((5_000, 1, 2) if args.quick else (100_000, 3, 8)))
            warmup = {**warm_broker(ctx, 3.0 if args.quick else 20.0), "bulk": bulk}
            run_started = time.time()
            cpu_before = machine.cpu_counters()
            plan = Plan(scenarios, systems, sizes, repeats, seed, first_wait_s, run_wait_s)
            outcome = run_plan(ctx, plan)
            # Here: machine facts read from the baked venv, which goes with the temp dir.
            meta = metadata(
                sizes,
                repeats,
                systems,
                pg,
                started,
                run_started,
                fill_seconds,
                outcome,
                run_wait_s,
                cpu_before,
            )
        finally:
            ctx.cleanup()
            last = cache_dir() / "last-run"
            shutil.rmtree(last, ignore_errors=True)
            shutil.copytree(logs, last)
            log(f"logs of this run: {last}")
            pg.drop(*ctx.databases(systems))
    names = [s.name for s in systems]
    meta["broker_warmup"] = warmup
    meta["command"] = replay_command(args, repeats, seed, run_wait_s)
    extra = {"repeats": repeats, "quick": args.quick, "scenarios": args.selected}
    extra.update({k: meta[k] for k in docs.RUN_FACTS})
    json_path, _ = results_files.write(last, "results", outcome, scenarios, names, extra)
    counts = settle_counts(outcome.results)
    log(
        f"results: {json_path} (.csv beside it); {counts['timed_runs']} timed runs, "
        f"{counts['checkpoints']} checkpoints, {counts['vacuum_analyze']} VACUUM (ANALYZE)"
    )
    failures = checks.correctness(outcome.results, sizes) + _given_up(ctx.problems)
    partial = set(args.selected) != set(NAMES)
    if args.quick or partial:
        for line in failures:
            log(f"FAIL {line}")
        verdict = (
            "FAILED"
            if failures
            else "correct (nothing lost, no order violations, no stored duplicates, "
            "every timed run settled)"
        )
        log(("quick run: " if args.quick else "partial run: ") + verdict)
        if not args.docs:
            return 1 if failures else 0
    meta["problems"] = ctx.problems + failures
    docs.write(args.out, outcome, names, meta)
    log(f"wrote {args.out / 'benchmarks.md'} and benchmarks-results.json/.csv")
    return 1 if failures and args.quick else 0


def _given_up(problems: list[str]) -> list[str]:
    """A run given up after two tries leaves a hole in the ratios: say so."""
    return [p for p in problems if "try 2" in p]


if __name__ == "__main__":
    sys.exit(main())
