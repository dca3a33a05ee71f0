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
from collections.abc import Awaitable, Callable, Iterator
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


async def paced_load(args: argparse.Namespace, commit: Callable[[range], Awaitable[None]]) -> None:
    """Commit `per_tx` items per transaction at `tx_rate` for `duration`, one transaction at a
    time on one connection (so commit order = creation order), and write each item's commit
    time (wall clock, after COMMIT returned) to `args.out`."""
    interval = 1.0 / args.tx_rate
    total = round(args.tx_rate * args.duration)
    times: list[tuple[int, float]] = []
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
        "linger.ms": 5,
    }
