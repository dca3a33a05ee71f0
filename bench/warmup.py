"""Untimed traffic through the Kafka broker before the first timed run.

Reason (bench/notes.md, 2026-11-29): the first run after the services start paid for the
broker warming up. One worker at 200 items/s had a latency p50 of 25-35 ms in its first
second, falling to ~3 ms only after 5-15 s, where the next run was within 2-7 ms from its
start (a fresh database, topic and worker each time). The steady scenario's warm-up is 2 s,
so whichever system ran first in repeat 1 carried it. This warm-up takes that away (p50
338.8 ms in its first second, 0.7 ms in its last, measured); it did not take away the
repeat-1 outlier of ours' p99 at 200/s in the partial run after it (1.80x the baseline in
repeat 1, 1.04x and 1.18x after), whose cause was not found (bench/notes.md).

So before the first timed run the bench sends paced single messages (one produce request
each, like a relay under a light load) to a throwaway topic and reads them back as the
scenarios do, for `seconds`. What it measured goes into the run's metadata: the p50 of its
first and of its last second show whether the broker had settled by the end.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Producer

from .context import PARTITIONS, Context
from .envs import log
from .kafka_io import TopicReader
from .scenarios import percentile

RATE = 500  # messages/s, one produce request each (linger 0)
VALUE_PAD = b"x" * 1000


def warm_broker(ctx: Context, seconds: float) -> dict[str, Any]:
    """Send `RATE` messages/s for `seconds` through a new topic and read them back."""
    total = int(RATE * seconds)
    topic = ctx.topic("broker-warmup")
    reader = TopicReader(ctx.bootstrap, topic, PARTITIONS, total)
    reader.start()
    producer = Producer({"bootstrap.servers": ctx.bootstrap, "linger.ms": 0, "acks": "all"})
    sent: dict[int, float] = {}
    started = time.monotonic()
    for seq in range(total):
        delay = started + seq / RATE - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        sent[seq] = time.time()
        value = b'{"bench_seq":%d,"pad":"%s"}' % (seq, VALUE_PAD)
        producer.produce(topic, value=value, key=str(seq % 1000).encode())
        producer.poll(0)
    producer.flush(30)
    complete = reader.wait(30.0)
    seen = reader.result.first_at
    per_second: dict[int, list[float]] = {}
    for seq, at in sent.items():
        if seq in seen:
            per_second.setdefault(seq // RATE, []).append((seen[seq] - at) * 1000)
    firsts = per_second.get(0, [])
    lasts = per_second.get(max(per_second), []) if per_second else []
    record = {
        "seconds": seconds,
        "sent": total,
        "seen": len(seen),
        "complete": complete,
        "p50_first_second_ms": percentile(firsts, 50) if firsts else None,
        "p50_last_second_ms": percentile(lasts, 50) if lasts else None,
    }
    log(
        f"broker warmed up: {len(seen)}/{total} messages in {seconds:g}s, latency p50 "
        f"{_ms(record['p50_first_second_ms'])} in the first second, "
        f"{_ms(record['p50_last_second_ms'])} in the last (untimed)"
    )
    return record


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} ms"
