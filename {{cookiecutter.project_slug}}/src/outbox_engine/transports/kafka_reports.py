"""What a delivery report becomes: the engine's exceptions, collected per batch.

`classify` turns a librdkafka error into `TransportUnavailable` (the cluster is not
reachable or not ready: the item stays pending, no retry consumed), `PermanentFailure`
(retrying will not fix it) or a plain failed attempt. `Deliveries` collects one batch's
reports on the poll thread and wakes the event loop once, when the last one arrives; it
also tells `StuckPartitions` (kafka_stuck.py) which partitions time out and, while any
does, which are written to again.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from confluent_kafka import KafkaError

from outbox_engine.transports.base import PermanentFailure, TransportUnavailable
from outbox_engine.transports.kafka_stuck import StuckPartitions

# Errors that mean "the cluster is not reachable or not ready": the item stays pending and
# no retry is consumed.
UNAVAILABLE_ERRORS = frozenset(
    {
        KafkaError._MSG_TIMED_OUT,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError._QUEUE_FULL,
        # Dropped by this process (a replaced client purged at shutdown), never the
        # message's fault: not an attempt either.
        KafkaError._PURGE_QUEUE,
        KafkaError._PURGE_INFLIGHT,
    }
)
# Errors that retrying will not fix.
PERMANENT_ERRORS = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.INVALID_MSG,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.TOPIC_EXCEPTION,
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError._INVALID_ARG,
    }
)


def describe(error: object) -> str:
    """`_TRANSPORT: Failed to get metadata: ...` rather than `KafkaError{code=...}`."""
    if isinstance(error, KafkaError):
        return f"{error.name()}: {error.str()}"
    return str(error)


def classify(error: KafkaError) -> Exception:
    """Turn a librdkafka error into the exception the engine understands."""
    code = error.code()
    text = f"kafka: {error.name()}: {error.str()}"
    if code in UNAVAILABLE_ERRORS or error.retriable():
        return TransportUnavailable(text)
    if code in PERMANENT_ERRORS or error.fatal():
        return PermanentFailure(text)
    return RuntimeError(text)


# One message for `KafkaProducer.produce_batch`: topic, value, key, headers.
OutgoingMessage = tuple[str, bytes, bytes | None, list[tuple[str, bytes]]]


class Deliveries:
    """The delivery reports of one batch, collected on the poll thread.

    One counter and one list for the whole batch, and one wake-up of the event loop when the
    last report arrives: no asyncio future and no loop callback per message. The counter is
    an `itertools.count`, whose `next` is atomic, so reports served by the poll thread and by
    a `flush` on another thread cannot lose an increment.
    """

    __slots__ = ("_done", "errors", "failed", "future", "loop", "size", "stuck", "watching")

    def __init__(self, loop: asyncio.AbstractEventLoop, size: int, stuck: StuckPartitions) -> None:
        self.loop = loop
        self.size = size
        self.future: asyncio.Future[list[Exception | None]] = loop.create_future()
        self.errors: list[KafkaError | Exception | None] = [None] * size
        self._done = itertools.count(1)
        self.failed = False  # set by the first error: until then `errors` is all None
        self.stuck = stuck
        # Delivered messages' partitions are looked at only while some partition has
        # timeouts (decided per batch: the usual batch reads no message's partition).
        self.watching = stuck.watching
        if size == 0:
            self.future.set_result([])

    def report(self, index: int, error: KafkaError | Exception | None, msg: Any = None) -> None:
        if error is not None:
            self.errors[index] = error
            self.failed = True
            if msg is not None:  # None: produce() refused it, it never had a partition
                track(self.stuck, error, msg)
        elif self.watching and msg is not None:
            self.stuck.delivered(msg.topic(), msg.partition())
        if next(self._done) == self.size:
            self.loop.call_soon_threadsafe(self._resolve)

    def _resolve(self) -> None:
        if self.future.done():  # cancelled: the relay stopped waiting (timeout, shutdown)
            return
        if not self.failed:  # the usual batch: every message delivered
            self.future.set_result([None] * self.size)
            return
        self.future.set_result(
            [
                None if e is None else (classify(e) if isinstance(e, KafkaError) else e)
                for e in self.errors
            ]
        )


def track(stuck: StuckPartitions, error: object, msg: Any) -> None:
    """Tell `stuck` of one report: a timeout starts or extends its partition's streak (other
    errors are not a stuck client), a delivery while any partition is watched ends one.
    `Deliveries.report` inlines the delivered case, deciding `watching` once per batch."""
    if error is not None:
        if isinstance(error, KafkaError) and error.code() == KafkaError._MSG_TIMED_OUT:
            stuck.timed_out(msg.topic(), msg.partition())
    elif stuck.watching:
        stuck.delivered(msg.topic(), msg.partition())
