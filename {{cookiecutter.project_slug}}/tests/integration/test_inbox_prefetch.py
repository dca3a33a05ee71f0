"""How much the inbox consumer fetches ahead of what it stores, on a real Kafka.

librdkafka fetches ahead of the application up to `queued.max.messages.kbytes`; its own
default, 64 MiB, was most of a consumer's resident memory. The consumer sets 16 MiB
(`PREFETCH_KBYTES`) unless the Kafka settings name another bound. These tests put 48 MiB
on the topic and hold the inbox table locked for a few seconds, so that the consumer's
first write waits and it stops taking messages while librdkafka goes on fetching; they read
librdkafka's own statistics for how much it had fetched but not handed over (per partition:
the next offset it will fetch minus the next one it hands over), at most the bound plus one
fetch per partition, librdkafka's documented overshoot, and at least half the bound (the
measure reads a real queue). Then the lock goes and every message is stored: the bound
holds memory back, never messages. A message larger than the whole bound (3 MiB against
1 MiB) is fetched and stored all the same: a fetch returns at least the first message of a
partition, whatever the sizes configured.

Once the prefetch is over its bound, librdkafka waits `fetch.queue.backoff.ms` before it
fetches that partition again: 1 s by its own default, in which a consumer that stores
faster than the bound lasts sits idle (half the inbox rate in the bench). The consumer sets
20 ms (`PREFETCH_BACKOFF_MS`); a test stores 24 MiB through a 1 MiB bound and adds up the
time between consecutive batch writes that were more than a quarter second apart, with the
engine's backoff and, as the control that shows the measure can tell, librdkafka's own.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from sqlalchemy import text

from {{ cookiecutter.package_name }}.container import Container
from {{ cookiecutter.package_name }}.settings import Settings
from outbox_engine.inbox.consumer import InboxConsumer
from outbox_engine.inbox.prefetch import PREFETCH_BACKOFF_MS, PREFETCH_KBYTES

from ..support import INBOX_BOX, KafkaMessage, make_registry, produce, wait_for
from .test_inbox import running_consumer

MESSAGE_BYTES = 64 * 1024
MESSAGES = 768  # 48 MiB: three times the engine's bound, under librdkafka's own 64 MiB
PARTITIONS = 3  # the test broker's num.partitions (scripts/kafka.sh): topics are auto-created
FETCH_BYTES = 1024 * 1024  # max.partition.fetch.bytes: librdkafka may overshoot by one each
MiB = 1024 * 1024
CONSUMER_BATCH = 10
HOLD_SECONDS = 3.0  # a local broker hands over 48 MiB in well under a second
REFILL_MESSAGES = 384  # 24 MiB through a 1 MiB bound: six fills of the prefetch at least
STALL_SECONDS = 0.25  # a gap between two batch writes longer than this is idle time


class Prefetch:
    """librdkafka's statistics: the messages fetched and not yet handed to the consumer, one
    sample per report. Reports are served by the consumer's next `consume()`, so those made
    while it waits on the lock arrive once it takes messages again, each as it was made."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.samples: list[int] = []

    def __call__(self, stats_json: str) -> None:
        partitions = json.loads(stats_json)["topics"].get(self.topic, {}).get("partitions", {})
        ahead = 0
        for number, partition in partitions.items():
            if number == "-1":  # librdkafka's internal "unassigned" partition
                continue
            handed = max(partition["app_offset"], partition["committed_offset"], 0)
            ahead += max(partition["next_offset"] - handed, 0)
        self.samples.append(ahead)


@pytest.mark.parametrize(
    ("configured_kbytes", "bound_kbytes"),
    [(None, PREFETCH_KBYTES), (4_096, 4_096)],
    ids=["engine-default", "env-variable-wins"],
)
async def test_the_consumer_fetches_ahead_at_most_its_bound_and_stores_everything(
    container: Container,
    env_topics: str,
    monkeypatch: pytest.MonkeyPatch,
    configured_kbytes: int | None,
    bound_kbytes: int,
) -> None:
    # Small batches: the consumer takes at most two (one waiting on the lock, the next
    # one prepared), so what it holds is a few messages and the rest waits in librdkafka.
    box = make_registry(inbox={"consume_batch_size": CONSUMER_BATCH}).get(INBOX_BOX)
    topic, table = box.inbox_config.topics[0], box.table_name
    bootstrap = container.settings().kafka_bootstrap_servers
    produce(bootstrap, topic, _numbered(MESSAGES))
    settings = container.settings()
    if configured_kbytes is not None:
        # As docs/performance.md says to: one variable, read by the settings.
        monkeypatch.setenv("KAFKA_CONFIG__QUEUED__MAX__MESSAGES__KBYTES", str(configured_kbytes))
        settings = Settings(database_url=settings.database_url, kafka_bootstrap_servers=bootstrap)
        assert settings.kafka_config()["queued.max.messages.kbytes"] == str(configured_kbytes)
    prefetch = Prefetch(topic)
    kafka_config = {
        **settings.kafka_config(),
        "statistics.interval.ms": 100,
        "stats_cb": prefetch,
    }

    async with container.engine().connect() as lock:
        await lock.execute(text(f"LOCK TABLE {table} IN SHARE MODE"))
        async with running_consumer(container, box, kafka_config=kafka_config) as consumer:
            await wait_for(lambda: _taken(consumer), within=60)  # its first write waits
            await asyncio.sleep(HOLD_SECONDS)  # librdkafka fetches ahead meanwhile
            stored_while_locked = consumer.stored
            await lock.rollback()  # the lock goes: the consumer stores everything
            await wait_for(lambda: _stored(container, table, MESSAGES), within=120)
    ahead = max(prefetch.samples, default=0) * MESSAGE_BYTES
    bound = bound_kbytes * 1024 + PARTITIONS * FETCH_BYTES
    assert stored_while_locked == 0
    # It fetched ahead while the lock held (the measure reads a real queue) ...
    assert ahead >= bound_kbytes * 1024 // 2, (ahead / MiB, len(prefetch.samples))
    # ... and never more than the bound and librdkafka's overshoot (48 MiB without a bound).
    assert ahead <= bound, (ahead / MiB, bound / MiB)
    async with container.engine().connect() as conn:
        firsts = (
            await conn.execute(text(f"SELECT substring(payload FROM 1 FOR 4) FROM {table}"))
        ).all()
    assert sorted(int.from_bytes(first, "big") for (first,) in firsts) == list(range(MESSAGES))


async def test_a_message_larger_than_the_bound_is_stored_whole(
    container: Container, env_topics: str
) -> None:
    # The box's own limit (max_message_bytes, 1 MiB by default) would store a 3 MiB message
    # as a rejected row without its payload: raised here, so only the fetch can get in the way.
    box = make_registry(inbox={"max_message_bytes": 4 * MiB}).get(INBOX_BOX)
    topic, table = box.inbox_config.topics[0], box.table_name
    bootstrap = container.settings().kafka_bootstrap_servers
    big = 3 * MiB  # three times the bound below, three times max.partition.fetch.bytes
    limit = str(4 * MiB)  # the broker's own message limit is 1 MiB: the topic raises it
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"max.message.bytes": limit}
    admin.create_topics([NewTopic(topic, num_partitions=1, config=config)])[topic].result(60)
    payloads = [hashlib.sha256(bytes([n])).digest() * (big // 32) for n in range(4)]
    produce(
        bootstrap,
        topic,
        [(f"k{n}", payload, []) for n, payload in enumerate(payloads)],
        config={"message.max.bytes": limit},
    )
    kafka_config = {**container.settings().kafka_config(), "queued.max.messages.kbytes": 1_024}

    async with running_consumer(container, box, kafka_config=kafka_config):
        await wait_for(lambda: _stored(container, table, len(payloads)), within=60)
    async with container.engine().connect() as conn:
        digests = (
            await conn.execute(text(f"SELECT length(payload), sha256(payload) FROM {table}"))
        ).all()
    expected = sorted((len(p), hashlib.sha256(p).digest()) for p in payloads)
    assert sorted((int(n), bytes(d)) for n, d in digests) == expected


@pytest.mark.parametrize(
    ("backoff_ms", "stalls"),
    [(None, False), (1_000, True)],
    ids=["engine-default", "librdkafka-default-control"],
)
async def test_a_full_prefetch_is_fetched_again_without_idling_the_consumer(
    container: Container, env_topics: str, backoff_ms: int | None, stalls: bool
) -> None:
    box = make_registry().get(INBOX_BOX)
    topic, table = box.inbox_config.topics[0], box.table_name
    bootstrap = container.settings().kafka_bootstrap_servers
    produce(bootstrap, topic, _numbered(REFILL_MESSAGES))
    kafka_config: dict[str, Any] = {
        **container.settings().kafka_config(),
        "queued.max.messages.kbytes": 1_024,
    }
    if backoff_ms is not None:
        kafka_config["fetch.queue.backoff.ms"] = backoff_ms  # the Kafka settings win

    async with running_consumer(container, box, kafka_config=kafka_config) as consumer:
        expected_backoff = PREFETCH_BACKOFF_MS if backoff_ms is None else backoff_ms
        assert consumer.kafka_config["fetch.queue.backoff.ms"] == expected_backoff
        await wait_for(lambda: _stored(container, table, REFILL_MESSAGES), within=120)
    async with container.engine().connect() as conn:
        # created_at is the time of the batch's transaction: one value per batch written.
        writes = (
            await conn.execute(
                text(
                    f"SELECT EXTRACT(EPOCH FROM created_at) FROM {table} "
                    "GROUP BY created_at ORDER BY created_at"
                )
            )
        ).scalars()
        times = [float(t) for t in writes]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    idle = sum(gap for gap in gaps if gap > STALL_SECONDS)
    if stalls:
        # librdkafka's 1 s after each of the fills: the measure sees the stalls.
        assert idle >= 2.0, (round(idle, 2), len(times))
    else:
        assert idle < 1.0, (round(idle, 2), [round(gap, 2) for gap in gaps if gap > STALL_SECONDS])


def _numbered(count: int) -> list[KafkaMessage]:
    """`count` messages of MESSAGE_BYTES over 40 keys, each value its number repeated (the
    first 4 bytes tell which message a stored row is)."""
    return [(f"k{n % 40}", n.to_bytes(4, "big") * (MESSAGE_BYTES // 4), []) for n in range(count)]


async def _taken(consumer: InboxConsumer) -> bool:
    return consumer.received > 0


async def _stored(container: Container, table: str, expected: int) -> bool:
    async with container.engine().connect() as conn:
        count = (await conn.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one()
    return int(count) == expected
