"""What every driver shares (stdlib only: drivers run in the venv of the system they drive).

A benchmark message carries its sequence number in its value (`"bench_seq":N`), whatever
envelope a system wraps around it, and its key is the Kafka message key. The reader finds
both without decoding the whole value.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path

EVENT_NAME = "bench_event"


def key_of(seq: int, keys: int) -> str:
    return str(seq % keys)


def body(seq: int, keys: int, size: int) -> dict[str, object]:
    """The payload as a mapping (for systems that take JSON documents); ~`size` bytes as JSON."""
    head = {"bench_seq": seq, "bench_key": key_of(seq, keys)}
    pad = max(size - len(json.dumps(head, separators=(",", ":"))) - 9, 0)
    return {**head, "pad": "x" * pad}


def payload(seq: int, keys: int, size: int) -> bytes:
    """The payload as bytes: the same document as `body`, compact JSON."""
    return json.dumps(body(seq, keys, size), separators=(",", ":")).encode()


def chunks(start: int, count: int, size: int) -> Iterator[range]:
    end = start + count
    for first in range(start, end, size):
        yield range(first, min(first + size, end))


def common_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--start", type=int, default=0, help="first sequence number")
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--tx-rate", type=float, default=200.0, help="transactions per second")
    parser.add_argument("--per-tx", type=int, default=1, help="items per transaction")
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--out", type=Path, default=None, help="commit times (load)")
    parser.add_argument("--topic", default="")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--start-at", type=float, default=0.0, help="paced load: wall clock time to start at"
    )


Command = Callable[[argparse.Namespace], Awaitable[None]]


def run_driver(
    commands: Mapping[str, Command],
    extra_args: Callable[[argparse.ArgumentParser], None] | None = None,
) -> None:
    """A driver's entry point: parse `<command> [options]` (the common options, and the
    driver's own from `extra_args`) and run that command."""
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=list(commands))
    if extra_args is not None:
        extra_args(parser)
    common_args(parser)
    args = parser.parse_args()
    asyncio.run(commands[args.command](args))


async def paced_load(args: argparse.Namespace, commit: Callable[[range], Awaitable[None]]) -> None:
    """Commit `per_tx` items per transaction at `tx_rate` for `duration`, one transaction at a
    time on one connection (so commit order = creation order), and write each item's commit
    time (wall clock, after COMMIT returned) to `args.out`. With `--start-at`, the first
    transaction waits for that wall clock time."""
    interval = 1.0 / args.tx_rate
    total = round(args.tx_rate * args.duration)
    times: list[tuple[int, float]] = []
    if args.start_at:  # two loads started together (bench/paired.py), set up by now
        await asyncio.sleep(max(0.0, args.start_at - time.time()))
    started = time.monotonic()
    seq = args.start
    for tick in range(total):
        delay = started + tick * interval - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        seqs = range(seq, seq + args.per_tx)
        await commit(seqs)
        now = time.time()
        times.extend((s, now) for s in seqs)
        seq += args.per_tx
    elapsed = time.monotonic() - started
    assert args.out is not None
    args.out.write_text(json.dumps({"elapsed": elapsed, "commits": times}, separators=(",", ":")))


def stop_event() -> asyncio.Event:
    """An event set by SIGTERM/SIGINT (relays run until the harness stops them)."""
    event = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, event.set)
    return event


def dsn() -> str:
    """The benchmark database as a plain libpq DSN."""
    return os.environ["DATABASE_URL"].replace("postgresql+asyncpg://", "postgresql://", 1)


def sqlalchemy_url() -> str:
    return "postgresql+asyncpg://" + dsn().removeprefix("postgresql://")


def producer_config() -> dict[str, object]:
    """The same delivery guarantees for every system that lets us set them."""
    return {
        "bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"],
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 1,
    }


ORDERS_DDL = (
    "CREATE TABLE IF NOT EXISTS bench_orders (id bigint GENERATED BY DEFAULT AS IDENTITY "
    "PRIMARY KEY, customer_id text NOT NULL, amount numeric(14,2) NOT NULL, "
    "created_at timestamptz NOT NULL DEFAULT now())"
)


# create-cost: transactions per mode before the loop switches to the other mode. Short
# blocks put both modes under the same state of the machine (a checkpoint, an autovacuum, a
# neighbour's burst lands on both); a block of several, not one, keeps what one mode leaves
# behind for the next transaction (a page to clean, a WAL flush) to one in ten of the other's.
COST_BLOCK = 10
# The share of each mode's slowest transactions left out of its mean. The loop is sequential,
# so a stall of the machine (tens to hundreds of ms) delays the one transaction that was
# running, whatever its mode: dropping each mode's slowest 1% removes the stalls, which land
# on one mode or the other by chance, and keeps every cost create() adds to every transaction.
COST_TRIM = 0.01


def cost_summary(durations: list[float], trim: float = COST_TRIM) -> dict[str, float]:
    """One mode's transaction times (seconds) as µs: the mean of all, the mean without the
    slowest `trim` share (at least the slowest one when there are 100 or more), the median,
    p99, and the count."""
    if not durations:
        raise ValueError("no transactions in this mode")
    ordered = sorted(durations)
    count = len(ordered)
    kept = ordered[: count - int(count * trim)]
    return {
        "count": count,
        "mean_us": sum(ordered) / count * 1e6,
        "trimmed_mean_us": sum(kept) / len(kept) * 1e6,
        "median_us": ordered[count // 2] * 1e6
        if count % 2
        else (ordered[count // 2 - 1] + ordered[count // 2]) / 2 * 1e6,
        "p99_us": ordered[min(count - 1, int(count * 0.99))] * 1e6,
    }


async def create_cost_rounds(
    args: argparse.Namespace, transaction: Callable[[bool, int], Awaitable[None]]
) -> None:
    """Sequential one-row business transactions without and with the system's create call,
    interleaved in blocks of COST_BLOCK (without first, then with, and so on) for `seconds`
    per mode in each of `rounds` rounds, each transaction timed on its own. Prints
    {"without": [...], "with": [...]} (tx/s per round: a mode's transactions over the time
    spent in them) and "summary": {"without": {...}, "with": {...}} (cost_summary over all
    rounds)."""
    results: dict[str, list[float]] = {"without": [], "with": []}
    times: dict[str, list[float]] = {"without": [], "with": []}
    done = 0
    clock = time.perf_counter
    for _ in range(args.rounds):
        spent = {"without": 0.0, "with": 0.0}
        counts = {"without": 0, "with": 0}
        deadline = time.monotonic() + 2 * args.seconds
        while time.monotonic() < deadline:
            for mode in ("without", "with"):
                with_create = mode == "with"
                kept = times[mode]
                for _ in range(COST_BLOCK):
                    started = clock()
                    await transaction(with_create, done)
                    took = clock() - started
                    kept.append(took)
                    spent[mode] += took
                    done += 1
                counts[mode] += COST_BLOCK
        for mode in ("without", "with"):
            results[mode].append(counts[mode] / spent[mode])
    summary = {mode: cost_summary(times[mode]) for mode in ("without", "with")}
    print(json.dumps({**results, "summary": summary}))
