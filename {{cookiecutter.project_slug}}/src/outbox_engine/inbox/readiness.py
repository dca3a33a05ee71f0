"""The inbox consumer's readiness: honest about what answers.

Every `health_interval` the consumer asks PostgreSQL for `SELECT 1` (5 s at most), and
Kafka for the metadata of its first topic (on its Kafka thread, 3 s at most; of every topic when it
subscribes by pattern only: the whole cluster's metadata is what a big cluster must not be
asked for by each consumer every few seconds) every `kafka_check_interval` while Kafka
answers and every `health_interval` while it does not. `readiness()` (and the `ready` event)
hold only while both answer and the poll loop turns, and name what is missing otherwise.
The client's "all brokers down" error and a batch the database refuses set the problem at
once, between checks. A problem is logged when it starts and when it ends, not per check;
"ready" is logged once. `consumers_readiness` is a consumer process's `/readyz` answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Protocol

from confluent_kafka import Consumer, KafkaException

from outbox_engine.store.inbox import ping
from outbox_engine.store.pgconn import DriverConnections
from outbox_engine.transports.kafka_reports import describe

# The consumer's lines keep the logger they always had (log filters and dashboards use it).
log = logging.getLogger("outbox_engine.inbox.consumer")


class ConsumerHealth:
    """The readiness state of one inbox consumer (box `name`)."""

    def __init__(self, name: str) -> None:
        self.name = name
        # What keeps the consumer from being ready (None: fine), checked every
        # `health_interval`; `ready` is set while both are None and the loop polls.
        self.kafka_problem: str | None = "not checked yet"
        self.db_problem: str | None = "not checked yet"
        self.polling = False
        self.said_ready = False
        self.ready = asyncio.Event()

    def readiness(self) -> tuple[bool, str]:
        """Ready while the poll loop turns, Kafka answers and PostgreSQL answers."""
        reasons = []
        if not self.polling:
            reasons.append("not polling yet")
        if self.kafka_problem is not None:
            reasons.append(f"Kafka: {self.kafka_problem}")
        if self.db_problem is not None:
            reasons.append(f"PostgreSQL: {self.db_problem}")
        if reasons:
            return False, f"inbox {self.name} not ready: " + "; ".join(reasons)
        return True, f"inbox {self.name}: ok"

    def update_ready(self) -> None:
        if self.readiness()[0]:
            self.ready.set()
            if not self.said_ready:
                self.said_ready = True
                log.info("inbox %s: ready: Kafka and PostgreSQL answer", self.name)
        else:
            self.ready.clear()

    def check_kafka(self, consumer: Consumer, topic: str | None = None) -> None:
        """Runs on the consumer's Kafka thread (inbox/kafka_thread.py): `topic`'s metadata
        (None: every topic's) within 3 s, or the reason."""
        try:
            consumer.list_topics(topic, timeout=3.0)
        except KafkaException as exc:
            problem = f"cannot reach Kafka ({describe(exc.args[0])})"
            if self.kafka_problem != problem:
                log.error("inbox %s: %s; not ready until it answers", self.name, problem)
            self.kafka_problem = problem
            return
        if self.kafka_problem is not None and self.said_ready:
            log.info("inbox %s: Kafka reachable again", self.name)
        self.kafka_problem = None

    async def check_database(self, connections: DriverConnections) -> None:
        try:
            async with asyncio.timeout(5.0), connections.acquire() as conn:
                await ping(conn)
        except Exception as exc:  # whatever it is, the database does not answer
            problem = (
                f"cannot reach PostgreSQL ({type(exc).__name__}: {exc or 'no answer within 5 s'})"
            )
            if self.db_problem != problem:
                log.error("inbox %s: %s; not ready until it answers", self.name, problem)
            self.db_problem = problem
            return
        if self.db_problem is not None and self.said_ready:
            log.info("inbox %s: PostgreSQL reachable again", self.name)
        self.db_problem = None


class Ready(Protocol):
    def readiness(self) -> tuple[bool, str]: ...


def consumers_readiness(consumers: Sequence[Ready]) -> tuple[bool, str]:
    """The `/readyz` answer of a consumer process: ready when every consumer is, otherwise
    each one's reasons (`inbox payments not ready: Kafka: cannot reach Kafka (...)`)."""
    answers = [consumer.readiness() for consumer in consumers]
    problems = [detail for ok, detail in answers if not ok]
    if problems:
        return False, "; ".join(problems)
    return True, f"ok: {len(answers)} inbox consumers"
