"""Offset commits sent in order on the consumer's Kafka thread, never from the event loop.

confluent-kafka's `Consumer.commit()`, asynchronous or not, does not return while another
thread of the same consumer is inside `consume()` (measured with confluent-kafka 2.16: a
commit made while a `consume(1, 3.0)` waited on an empty topic returned after 2.8 s, and
burned CPU meanwhile). The consumer fetches the next batch while it stores one, so a
commit made on the event loop held the loop until that fetch returned: up to
`poll_timeout` (1 s) whenever the input ran dry, and every other box's consumer in the
process with it. Here each commit is handed to the consumer's one Kafka thread
(inbox/kafka_thread.py), behind the fetch in flight, in the order given; the caller does
not wait for it. `drain()` waits until every commit handed over has been sent (the
consumer's `flush()` and shutdown).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from outbox_engine.inbox.kafka_thread import ConsumerThread

log = logging.getLogger("outbox_engine.inbox.consumer")


class OffsetCommits:
    """The offset commits of one consumer, sent one after the other on its Kafka thread."""

    def __init__(
        self,
        thread: ConsumerThread,
        on_error: Callable[[KafkaError | None, list[TopicPartition]], None],
    ) -> None:
        self._on_error = on_error
        self._thread = thread
        self._last: asyncio.Future[None] | None = None
        self.sent = 0

    def send(self, consumer: Consumer, offsets: list[TopicPartition]) -> None:
        """Commit `offsets` (asynchronously: confirmed through the consumer's `on_commit`)
        after every commit handed over before; returns at once."""
        self._last = self._thread.call(self._commit, consumer, offsets)

    def _commit(self, consumer: Consumer, offsets: list[TopicPartition]) -> None:
        try:
            consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as exc:
            # The batch is stored: a commit that is lost only means it is read again, and
            # the unique uuid absorbs it.
            self._on_error(exc.args[0], offsets)
        except Exception:  # a commit must never stop the next ones
            log.exception("offset commit failed; the batch will be read again")
        self.sent += 1

    async def drain(self) -> None:
        """Wait until every commit handed over has been sent."""
        if self._last is not None:
            last, self._last = self._last, None
            await last
