"""The benchmark harness: `./bench/run.sh [--quick] [--repeats N]` (run.sh sets up the venvs
and services, then runs this module). See docs/benchmarks.md for what it measures."""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import machine, report, scenarios
from .envs import PEERS, ROOT, bake_project, cache_dir, log, make_venv, versions
from .kafka_io import produce_inbox_input
from .pg import Postgres
from .systems import System


@dataclass(frozen=True)
class Sizes:
    backlog: int
    keys: int
    size: int
    workers: tuple[int, ...]
    rates: tuple[int, ...]
    duration: float
    warmup: float
    tx_rate: float
    inbox_distinct: int
    inbox_duplicates: int
    cost_seconds: float
    cost_rounds: int
    peer_cap: float
    drain_timeout: float


FULL = Sizes(
    backlog=100_000,
    keys=1000,
    size=1024,
    workers=(1, 2),
    rates=(200, 2000),
    duration=30,
    warmup=2,
    tx_rate=200,
    inbox_distinct=90_000,
    inbox_duplicates=10_000,
    cost_seconds=3,
    cost_rounds=3,
    peer_cap=60,
    drain_timeout=300,
)
QUICK = Sizes(
    backlog=5_000,
    keys=100,
    size=1024,
    workers=(1, 2),
    rates=(200,),
    duration=5,
    warmup=1,
    tx_rate=100,
    inbox_distinct=4_500,
    inbox_duplicates=500,
    cost_seconds=1,
    cost_rounds=1,
    peer_cap=60,
    drain_timeout=120,
)


SCENARIOS = ("drain", "steady", "inbox", "cost")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/run.sh", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="small sizes, ours + baseline, correctness only"
    )
    parser.add_argument("--repeats", type=int, default=None, help="default 3 (quick: 1)")
    parser.add_argument(
        "--peers",
        default=None,
        help="comma-separated peers, or none (default: all; quick: none)",
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "docs", help="where benchmarks.md and img/ go"
    )
    parser.add_argument(
        "--docs", action="store_true", help="write the docs even with --quick (to check them)"
    )
    parser.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help=f"comma-separated subset of {','.join(SCENARIOS)} (a subset writes no docs: "
        "for profiling one scenario)",
    )
    parser.add_argument(
        "--wait-quiet", type=float, default=30.0, help="minutes to wait for load < 1.0"
    )
    args = parser.parse_args()
    args.selected = {s.strip() for s in args.scenarios.split(",") if s.strip()}
    unknown = args.selected - set(SCENARIOS)
    if unknown or not args.selected:
        parser.error(f"--scenarios: choose from {','.join(SCENARIOS)} (got {args.scenarios!r})")
    return args


def build_systems(
    args: argparse.Namespace, workdir: Path, services: dict[str, str]
) -> list[System]:
    log("baking the default project and installing it")
    project = bake_project(workdir)
    ours = System("ours", project.python, "ours.py", services, project=project, inbox=True)
    ours.versions = {"order-service (baked)": "template HEAD"}
    bench_python = Path(sys.executable)
    baseline = System("baseline", bench_python, "baseline.py", services, inbox=True)
    baseline.versions = versions(bench_python, ["asyncpg", "confluent-kafka"])
    systems = [ours]
    chosen = args.peers if args.peers is not None else ("" if args.quick else ",".join(PEERS))
    peers = [p for p in chosen.split(",") if p and p != "none"]
    for peer in peers:
        log(f"installing {peer} into its own venv")
        python = make_venv(cache_dir() / "venvs" / peer, PEERS[peer])
        driver = {
            "faststream-outbox": "faststream_outbox_driver.py",
            "omni-box": "omnibox_driver.py",
        }[peer]
        system = System(peer, python, driver, services)
        system.versions = versions(
            python,
            [
                peer,
                *(
                    {
                        "faststream-outbox": ["faststream", "confluent-kafka"],
                        "omni-box": ["aiokafka"],
                    }[peer]
                ),
            ],
        )
        systems.append(system)
    systems.append(baseline)
    return systems


def attempt(
    ctx: scenarios.Context, label: str, run: Callable[[], dict[str, Any]]
) -> dict[str, Any] | None:
    """Run one scenario; run it again once if the shared broker restarted meanwhile (other
    jobs' fault tests stop it) or it failed; give up with a note after the second try."""
    for trial in (1, 2):
        broker = machine.kafka_pid()
        try:
            result = run()
        except Exception as exc:
            note = f"{label}: try {trial} failed: {type(exc).__name__}: {str(exc)[:300]}"
        else:
            if machine.kafka_pid() == broker and broker is not None:
                return result
            note = f"{label}: try {trial} discarded: the Kafka broker restarted during it"
        log(note)
        ctx.problems.append(note)
    return None


def _terminate(_signum: int, _frame: object) -> None:
    raise SystemExit(143)  # run the cleanup (databases, topics, temp dir) on SIGTERM


def main() -> int:
    signal.signal(signal.SIGTERM, _terminate)
    args = parse_args()
    sizes = QUICK if args.quick else FULL
    repeats = args.repeats or (1 if args.quick else 3)
    database_url = os.environ["TEST_DATABASE_URL"]
    bootstrap = os.environ["TEST_KAFKA_BOOTSTRAP_SERVERS"]
    services = {"KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="outbox-bench-") as tmp:
        workdir = Path(tmp)
        logs = workdir / "logs"
        logs.mkdir()
        systems = build_systems(args, workdir / "bake", services)
        names = [s.name for s in systems]
        pg = Postgres(database_url)
        ctx = scenarios.Context(pg, bootstrap, logs, sizes.keys, sizes.size, [], sizes.backlog)
        try:
            log(f"systems: {', '.join(names)}; filling template databases in parallel")
            fills = [(s, scenarios.prepare_templates(ctx, s, sizes.backlog)) for s in systems]
            fill_seconds: dict[str, float] = {}
            fill_started = time.monotonic()
            pending = [(s, c) for s, c in fills if c is not None]
            while pending:  # note each fill's end (they run in parallel, sharing the CPUs)
                for system, child in list(pending):
                    if child.alive():
                        continue
                    if child.stop() != 0:
                        raise RuntimeError(f"filling {system.name} failed:\n{child.tail()}")
                    fill_seconds[system.name] = time.monotonic() - fill_started
                    pending.remove((system, child))
                time.sleep(0.5)
            inbox_topic = ctx.topic("inbox-input")
            sent = produce_inbox_input(
                bootstrap,
                inbox_topic,
                sizes.inbox_distinct,
                sizes.inbox_duplicates,
                sizes.keys,
                sizes.size,
            )
            load_at_start = machine.load1()
            quiet = load_at_start < 1.0
            if not args.quick:
                quiet, load_at_start = machine.wait_for_quiet(1.0, args.wait_quiet)
            run_started = time.time()
            results: dict[str, list[dict[str, Any]]] = {
                "drain": [],
                "steady": [],
                "inbox": [],
                "create_cost": [],
            }
            loads: list[float] = []
            for repeat in range(repeats):
                log(f"repeat {repeat + 1}/{repeats}")
                for workers in sizes.workers if "drain" in args.selected else ():
                    for system in systems:
                        peer = system.name not in ("ours", "baseline")
                        cap = sizes.peer_cap if peer else sizes.drain_timeout
                        loads.append(machine.load1())
                        result = attempt(
                            ctx,
                            f"drain {system.name} w{workers}",
                            functools.partial(
                                scenarios.drain, ctx, system, workers, sizes.backlog, cap
                            ),
                        )
                        if result is None:
                            continue
                        result["repeat"] = repeat
                        results["drain"].append(result)
                        log(
                            f"drain {system.name} w{workers}: {result['rate']:,.0f} msgs/s, "
                            f"{result['delivered']:,} delivered, dups {result['duplicates']}, "
                            f"order violations {result['order_violations']}"
                        )
                for rate in sizes.rates if "steady" in args.selected else ():
                    for system in systems:
                        loads.append(machine.load1())
                        result = attempt(
                            ctx,
                            f"steady {system.name} {rate}/s",
                            functools.partial(
                                scenarios.steady,
                                ctx,
                                system,
                                rate,
                                sizes.duration,
                                sizes.warmup,
                                sizes.tx_rate,
                            ),
                        )
                        if result is None:
                            continue
                        result["repeat"] = repeat
                        results["steady"].append(result)
                        log(
                            f"steady {system.name} {rate}/s: p50 {result['p50']:.1f} p99 {result['p99']:.1f} ms, "
                            f"undelivered {result['undelivered']}, order violations {result['order_violations']}"
                        )
                for system in systems if "inbox" in args.selected else []:
                    if not system.inbox:
                        continue
                    loads.append(machine.load1())
                    result = attempt(
                        ctx,
                        f"inbox {system.name}",
                        functools.partial(
                            scenarios.inbox,
                            ctx,
                            system,
                            inbox_topic,
                            sizes.inbox_distinct,
                            sent,
                            300,
                        ),
                    )
                    if result is None:
                        continue
                    result["repeat"] = repeat
                    results["inbox"].append(result)
                    log(
                        f"inbox {system.name}: {result['rate']:,.0f} rows/s, lost {result['lost']}, "
                        f"stored twice {result['stored_duplicates']}"
                    )
                for system in systems if "cost" in args.selected else []:
                    loads.append(machine.load1())
                    cost = attempt(
                        ctx,
                        f"create cost {system.name}",
                        functools.partial(
                            scenarios.create_cost,
                            ctx,
                            system,
                            sizes.cost_seconds,
                            sizes.cost_rounds,
                        ),
                    )
                    if cost is None:
                        continue
                    cost["repeat"] = repeat
                    results["create_cost"].append(cost)
                    log(
                        f"create cost {system.name}: {cost['without']:,.0f} -> "
                        f"{cost['with']:,.0f} tx/s (+{cost['overhead_pct']:.1f}% per tx)"
                    )
        finally:
            ctx.cleanup()
            last = cache_dir() / "last-run"
            shutil.rmtree(last, ignore_errors=True)
            shutil.copytree(logs, last)
            log(f"logs of this run: {last}")
            pg.drop(*ctx.databases(systems))
        failures = correctness(results, sizes)
        (cache_dir() / "last-run" / "results.json").write_text(json.dumps(results, default=str))
        partial = args.selected != set(SCENARIOS)
        if (args.quick or partial) and not args.docs:
            for line in failures:
                log(f"FAIL {line}")
            log(
                ("quick run: " if args.quick else "partial run (no docs written): ")
                + (
                    "FAILED"
                    if failures
                    else "correct (nothing lost, no order violations, no stored duplicates)"
                )
            )
            return 1 if failures else 0
        meta = metadata(
            args,
            sizes,
            repeats,
            systems,
            pg,
            started,
            run_started,
            quiet,
            load_at_start,
            loads,
            fill_seconds,
        )
        meta["problems"] = ctx.problems + failures
        write_docs(args.out, results, [s.name for s in systems], meta)
        log(f"wrote {args.out / 'benchmarks.md'}")
        return 0


def correctness(results: dict[str, list[dict[str, Any]]], sizes: Sizes) -> list[str]:
    """What must hold for ours and the baseline (peers are only reported)."""
    failures = []
    for d in results["drain"]:
        if d["system"] in ("ours", "baseline"):
            if not d["complete"]:
                failures.append(
                    f"drain {d['system']} w{d['workers']}: {d['delivered']}/{sizes.backlog} delivered"
                )
            if d["order_violations"] or d["keyless"]:
                failures.append(
                    f"drain {d['system']} w{d['workers']}: {d['order_violations']} order violations, {d['keyless']} keyless"
                )
        for problem in d["problems"]:
            failures.append(f"drain {d['system']} w{d['workers']}: {problem}")
    for s in results["steady"]:
        if s["system"] in ("ours", "baseline") and (s["undelivered"] or s["order_violations"]):
            failures.append(
                f"steady {s['system']} {s['rate']}/s: {s['undelivered']} undelivered, {s['order_violations']} order violations"
            )
        for problem in s["problems"]:
            failures.append(f"steady {s['system']} {s['rate']}/s: {problem}")
    for i in results["inbox"]:
        if i["lost"] or i["stored_duplicates"]:
            failures.append(
                f"inbox {i['system']}: lost {i['lost']}, stored twice {i['stored_duplicates']}"
            )
    return failures


def metadata(
    args: argparse.Namespace,
    sizes: Sizes,
    repeats: int,
    systems: list[System],
    pg: Postgres,
    started: float,
    run_started: float,
    quiet: bool,
    load_at_start: float,
    loads: list[float],
    fill_seconds: dict[str, float],
) -> dict[str, Any]:
    import statistics

    from .configs import config_lines

    load_note = (
        f"1-minute load average at start {load_at_start:.2f}, during the run median "
        f"{statistics.median(loads):.2f} (max {max(loads):.2f}); "
        + (
            "the machine was quiet (load < 1.0) at the start."
            if quiet
            else "**the machine could not be had quiet (load >= 1.0 after waiting): other jobs shared its 2 cores, so absolute numbers are low and noisy; the ratios of the same run are what to read.**"
        )
    )
    peers = [s.name for s in systems if s.name not in ("ours", "baseline")]
    return {
        "repeats": repeats,
        "started": dt.datetime.fromtimestamp(run_started, dt.UTC).strftime("%Y-%m-%d %H:%M"),
        "duration_min": (time.time() - started) / 60,
        "load_note": load_note,
        "machine": [
            f"CPU: {machine.cpu_model()}, {os.cpu_count()} cores; RAM {machine.ram_gib():.0f} GiB",
            f"PostgreSQL {pg.version()} (scripts/postgres.sh, its defaults: fsync on), "
            f"Apache Kafka {machine.kafka_version()} (KRaft, one broker, scripts/kafka.sh)",
            f"Python {machine.python_version(str(systems[0].python))} for every system",
            "Versions: "
            + "; ".join(
                f"{s.name}: " + ", ".join(f"{k} {v}" for k, v in s.versions.items())
                for s in systems
            ),
            "Backlog fill (not measured; each system's create API, all four in parallel), "
            "done after: " + ", ".join(f"{k} {v:.0f}s" for k, v in fill_seconds.items()),
        ],
        "backlog": sizes.backlog,
        "size": sizes.size,
        "keys": sizes.keys,
        "duration": sizes.duration,
        "warmup": sizes.warmup,
        "cap_note": (
            f"Peers are stopped after {sizes.peer_cap:.0f} s (at their rate a full drain would "
            "take minutes per run); their rate is over what they delivered by then, from a "
            "backlog that was still deep, so the claim cost is comparable."
            if peers
            else ""
        ),
        "tx_note": (
            f"The load commits {sizes.tx_rate:.0f} transactions/s on one connection, one after "
            "the other (commit order = creation order): at 200 items/s one item per "
            "transaction, at 2,000 items/s ten items per transaction (the batch create API of "
            "each system)."
        ),
        "inbox_note": (
            f"{sizes.inbox_distinct + sizes.inbox_duplicates:,} messages on an {scenarios.PARTITIONS}-partition topic, "
            f"{sizes.inbox_duplicates:,} of them repeating an earlier `message-id`; the consumer "
            "starts from scratch (a new group) and stores them. rows/s = stored rows / "
            "(last - first `created_at`, the transaction time of the first and last batch), "
            "so consumer start-up and group join are not counted; consumed msgs/s counts the "
            "duplicates too. Ours: `<slug> consumer` (batches of 500, one `unnest` INSERT ... "
            "ON CONFLICT DO NOTHING per batch with its NOTIFY, then the batch's offset commit; "
            "the next batch is fetched and prepared while one is written). The peers are not run here: "
            "faststream-outbox has no inbox; omni-box's inbox runner was not wired up in this "
            "harness yet."
        ),
        "cost_note": (
            f"One session, sequential transactions for {sizes.cost_seconds:.0f} s per mode, "
            f"{sizes.cost_rounds} alternating rounds per repeat: `INSERT INTO bench_orders ... "
            "RETURNING id` alone vs. the same plus the system's create call for one ~1 KB item "
            "in the same transaction: ours `outbox.create(session, OrderOutboxItem, "
            "event_key=str(order_id), event_name=..., payload=<bytes>)` (one statement: "
            "the INSERT and the pg_notify), faststream-outbox `broker.publish(doc, queue=..., session=session)`, "
            "omni-box `repo.create(domain.create_outbox_event(...))`, the baseline a prepared "
            "INSERT and a NOTIFY. Added time per tx = tx/s without / tx/s with - 1."
        ),
        "targets": [],  # filled from the results in write_docs
        "configs": config_lines(sizes, peers),
    }


def write_docs(
    out: Path, results: dict[str, Any], systems: list[str], meta: dict[str, Any]
) -> None:
    from . import plots

    peers = [s for s in systems if s not in ("ours", "baseline")]
    meta["targets"] = report.target_rows(results, peers, lambda ok: "yes" if ok else "**no**")
    notes = ROOT / "bench" / "notes.md"
    meta["notes"] = notes.read_text() if notes.exists() else ""
    (out / "img").mkdir(parents=True, exist_ok=True)
    plots.throughput_bars(results["drain"], systems, out / "img" / "bench-throughput.png")
    plots.latency_cdf(results["steady"], systems, out / "img" / "bench-latency-cdf.png")
    (out / "benchmarks.md").write_text(report.render(results, systems, meta))


if __name__ == "__main__":
    sys.exit(main())
