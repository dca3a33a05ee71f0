"""The command line of `./bench/run.sh` (parsing only; bench/__main__.py composes the run)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .envs import ROOT
from .registry import NAMES


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/run.sh",
        description="Benchmarks of the baked project against a raw baseline and the peers; "
        "see docs/benchmarks.md for what it measures and how.",
    )
    parser.add_argument(
        "--quick", action="store_true", help="small sizes, ours + baseline, correctness only"
    )
    parser.add_argument("--repeats", type=int, default=None, help="default 3 (quick: 1)")
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the system order per repeat (default: a fresh one, printed; "
        "give a run's seed to replay its order)",
    )
    parser.add_argument(
        "--peers",
        default=None,
        help="comma-separated peers, or none (default: all; quick: none)",
    )
    parser.add_argument(
        "--debezium",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run ours-debezium: the outbox box relayed by Debezium on Kafka Connect "
        "(run.sh starts Connect; default: on, quick: off)",
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "docs", help="where benchmarks.md and img/ go"
    )
    parser.add_argument(
        "--docs", action="store_true", help="write the docs even with --quick (to check them)"
    )
    parser.add_argument(
        "--scenarios",
        default=",".join(NAMES),
        help=f"comma-separated subset of {','.join(NAMES)} (a subset writes no docs: "
        "for profiling one scenario)",
    )
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=30.0,
        help="minutes to wait for load < 1.0 before the first timed run (quick: 0)",
    )
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=None,
        help="seconds to wait at most for load < 1.0 before every later timed run "
        "(default 60: the 1-minute average of a busy run decays from 2 to 1 in ~42 s; quick: 0, "
        "the load is still measured and recorded)",
    )
    args = parser.parse_args(argv)
    if args.debezium is None:
        args.debezium = not args.quick
    args.selected = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = set(args.selected) - set(NAMES)
    if unknown or not args.selected:
        parser.error(f"--scenarios: choose from {','.join(NAMES)} (got {args.scenarios!r})")
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats: at least 1")
    return args
