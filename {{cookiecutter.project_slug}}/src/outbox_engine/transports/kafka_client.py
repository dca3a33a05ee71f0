"""One librdkafka producer and the thread that polls it.

`KafkaProducer` (kafka.py) holds one `PollingClient` at a time and replaces it when it is
stuck (kafka_stuck.py); the one replaced keeps its thread until it has flushed, so the
delivery reports of the messages it already took still reach their batches.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from confluent_kafka import Producer

from outbox_engine.transports.kafka_logs import REPEATS, client_config


class PollingClient:
    def __init__(self, config: dict[str, Any]) -> None:
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
