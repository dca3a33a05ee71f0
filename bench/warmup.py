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

Before that, in bulk (`warm_broker_bulk`): the paced phase warms the path of small requests,
not the one a drain takes (record batches of ~50 messages from a producer at full speed, fetched in
bulk). In a drain-only run on a fresh machine (bench/notes.md, 2026-12-02 16:35) the broker
spent 29.5 µs of CPU a message in the first timed run, 15.2 and 26.6 in the next two, and
5.3-14.2 in the 20 after them; in the report of 2026-12-02 12:32 the first timed run (the
baseline's) had the broker at 31.3 µs a message against 10.5-10.6 in its other repeats, and
that repeat's ratio was the run's outlier (1.56x against 0.91 and 1.10x). So the bench
sends rounds of `per_round` 1 KB messages at full speed (half of them with the headers an
outbox relay sends, half without, as the baseline sends them), reads each round back, and
measures the broker's CPU per message of the round from /proc: at least `min_rounds`,
until two rounds in a row are within 20% of each other, at most `max_rounds`. The rounds'
figures go into the run's metadata beside the paced phase's.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Producer

from . import machine, procs
from .context import PARTITIONS, Context
from .envs import log
from .kafka_io import TopicReader, produce
from .scenarios import percentile

RATE = 500  # messages/s, one produce request each (linger 0)
VALUE_PAD = b"x" * 1000
# What an outbox relay sends besides key and value (the baked project's Kafka transport).
RELAY_HEADERS = [
    ("message-id", b"6f1c1bb0-3c1e-4b8e-9a53-0a2f4ee1a7d1"),
    ("event-name", b"order_created"),
    ("created-at", b"2026-12-02T16:35:00.123456+00:00"),
    ("correlation-id", b"6f1c1bb0-3c1e-4b8e-9a53-0a2f4ee1a7d1"),
    ("hop", b"0"),
]
SETTLED_WITHIN = 0.20  # two rounds in a row this close: the broker's cost stopped falling


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


def warm_broker_bulk(
    ctx: Context, per_round: int, min_rounds: int, max_rounds: int
) -> dict[str, Any]:
    """Rounds of `per_round` messages produced at full speed and read back (module doc);
    the broker's CPU µs a message per round, and whether the last two were within
    SETTLED_WITHIN of each other."""
    broker = machine.kafka_pid()
    rounds: list[dict[str, Any]] = []
    settled = False
    producer = Producer(
        {
            "bootstrap.servers": ctx.bootstrap,
            "linger.ms": 1,
            "acks": "all",
            "enable.idempotence": True,
        }
    )
    for number in range(max_rounds):
        topic = ctx.topic(f"broker-warmup-bulk-{number}")
        reader = TopicReader(ctx.bootstrap, topic, PARTITIONS, per_round)
        reader.start()
        before = procs.cpu_seconds(broker) if broker is not None else None
        started = time.monotonic()
        for seq in range(per_round):
            value = b'{"bench_seq":%d,"pad":"%s"}' % (seq, VALUE_PAD)
            headers = RELAY_HEADERS if seq % 2 else None
            produce(producer, topic, value, str(seq % 1000).encode(), headers)
            if seq % 1000 == 0:
                producer.poll(0)
        left = producer.flush(60)
        complete = reader.wait(60.0)
        after = procs.cpu_seconds(broker) if broker is not None else None
        # Gone at once (its files after the broker's delete delay): up to 8 rounds of
        # ~120 MB each need not wait for the run's end.
        ctx.drop_topic(topic)
        cost = None if before is None or after is None else (after - before) * 1e6 / per_round
        rounds.append(
            {
                "messages": per_round,
                "undelivered": left,
                "seen": reader.result.distinct,
                "complete": complete,
                "seconds": time.monotonic() - started,
                "broker_us_per_msg": cost,
            }
        )
        if not complete or left:
            break
        costs = [r["broker_us_per_msg"] for r in rounds[-2:]]
        if number + 1 >= min_rounds and _close(costs):
            settled = True
            break
    shown = ", ".join(_us(r["broker_us_per_msg"]) for r in rounds)
    log(
        f"broker warmed up in bulk: {len(rounds)} rounds of {per_round:,} messages, the "
        f"broker's CPU a message {shown} µs ({'settled' if settled else 'not settled'}; "
        "untimed)"
    )
    return {"per_round": per_round, "rounds": rounds, "settled": settled}


def _close(costs: list[float | None]) -> bool:
    """Two measured rounds whose costs differ by at most SETTLED_WITHIN of the larger."""
    if len(costs) != 2 or costs[0] is None or costs[1] is None:
        return False
    return abs(costs[1] - costs[0]) <= SETTLED_WITHIN * max(costs[0], costs[1])


def _us(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"
