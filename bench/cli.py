"""The command line of `./bench/run.sh` (parsing only; bench/__main__.py composes the run)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .envs import ROOT
from .registry import NAMES

DEFAULT_WAIT_QUIET_MIN = 30.0


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
        default=DEFAULT_WAIT_QUIET_MIN,
        help="minutes to wait at most for a quiet CPU (bench/settle.py) before the first timed "
        "run (quick: 0)",
    )
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=None,
        help="seconds to wait at most for a quiet CPU (bench/settle.py) before every later "
        "timed run (default 60; quick: 0, the CPU is still measured and recorded)",
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


def replay_command(args: argparse.Namespace, repeats: int, seed: int, run_wait_s: float) -> str:
    """The command that runs this run's method again: the same sizes, repeats, systems, quiet
    waits and seed (so the same order of systems per repeat). The report prints it, so that a
    second run, to see whether the ratios reproduce, is made the same way as the first."""
    parts = ["./bench/run.sh"]
    if args.quick:
        parts.append("--quick")
    parts += ["--repeats", str(repeats), "--seed", str(seed)]
    if args.peers is not None:
        parts += ["--peers", args.peers]
    if args.debezium == args.quick:  # not the default of this mode
        parts.append("--debezium" if args.debezium else "--no-debezium")
    if set(args.selected) != set(NAMES):
        parts += ["--scenarios", ",".join(args.selected)]
    if not args.quick and args.wait_quiet != DEFAULT_WAIT_QUIET_MIN:
        parts += ["--wait-quiet", f"{args.wait_quiet:g}"]
    parts += ["--quiet-wait", f"{run_wait_s:g}"]
    return " ".join(parts)
