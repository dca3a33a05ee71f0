"""One librdkafka producer and the thread that polls it; what the cluster tells a client.

`KafkaProducer` (kafka.py) holds one `PollingClient` at a time and replaces it when it is
stuck (kafka_stuck.py); the one replaced keeps its thread until it has flushed, so the
delivery reports of the messages it already took still reach their batches. Whether it is
stuck is decided with `led_partitions` (does the cluster list a leader for the partitions
it cannot write?) and `new_client_answers` (does the cluster answer a client made now,
while this one's requests fail?).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaException, Producer

from outbox_engine.transports.kafka_logs import REPEATS, client_config
from outbox_engine.transports.kafka_settings import settings_checked
from outbox_engine.transports.kafka_stuck import Partition


class PollingClient:
    def __init__(self, config: dict[str, Any]) -> None:
        with settings_checked(config):
            self.producer = Producer(client_config(config))
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._poll_forever, name="kafka-producer", daemon=True
        )
        self._thread.start()

    def _poll_forever(self) -> None:
        producer = self.producer
        next_sweep = 0.0
        while not self._stopping.is_set():
            # poll() returns as soon as it has served a report, so under load the wait is
            # never reached; idle, a longer wait is fewer wake-ups (2/s at 0.5 s).
            producer.poll(0.5)
            if time.monotonic() >= next_sweep:  # summaries of repeated log lines, when due
                next_sweep = time.monotonic() + 1.0
                REPEATS.sweep()

    async def close(self, wait_seconds: float) -> int:
        """Flush (at most `wait_seconds`), stop the poll thread; the messages left."""
        remaining: int = await asyncio.to_thread(self.producer.flush, wait_seconds)
        self._stopping.set()
        await asyncio.to_thread(self._thread.join, 2.0)
        return remaining


async def led_partitions(
    producer: Producer, partitions: Sequence[Partition], wait_seconds: float
) -> list[Partition]:
    """Those of `partitions` whose topic's metadata lists a leader for them (a topic whose
    metadata request fails or errs contributes none)."""
    led: list[Partition] = []
    for topic in sorted({t for t, _ in partitions}):
        try:
            metadata = await asyncio.to_thread(producer.list_topics, topic, timeout=wait_seconds)
        except KafkaException:
            continue
        described = metadata.topics.get(topic)
        if described is None or described.error is not None:
            continue
        for name, number in partitions:
            if name == topic:
                found = described.partitions.get(number)
                if found is not None and found.error is None and found.leader >= 0:
                    led.append((name, number))
    return led


async def new_client_answers(
    config: dict[str, Any], topic: str | None, wait_seconds: float
) -> bool:
    """Whether a client made now with `config` gets an answer to a metadata request (for
    `topic`, or the whole cluster): the cluster is up, whatever an older client says."""

    def ask() -> bool:
        with settings_checked(config):
            probe = Producer(client_config(config))
        try:
            probe.list_topics(topic, timeout=wait_seconds)
            return True
        except KafkaException:
            return False
        finally:
            probe.flush(0)

    return await asyncio.to_thread(ask)
