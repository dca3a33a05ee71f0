"""Offset commits sent in order on the consumer's Kafka thread, never from the event loop;
and, once the input runs dry, the newest offsets committed again wherever the broker does
not hold them.

confluent-kafka's `Consumer.commit()`, asynchronous or not, does not return while another
thread of the same consumer is inside `consume()` (measured with confluent-kafka 2.16: a
commit made while a `consume(1, 3.0)` waited on an empty topic returned after 2.8 s, and
burned CPU meanwhile). The consumer fetches the next batch while it stores one, so a
commit made on the event loop held the loop until that fetch returned: up to
`poll_timeout` (1 s) whenever the input ran dry, and every other box's consumer in the
process with it. Here each commit is handed to the consumer's one Kafka thread
(inbox/kafka_thread.py), behind the fetch in flight, in the order given; the caller does
not wait for it. `drain()` waits until every commit handed over has been sent.

Commits are asynchronous, so the broker's answer comes later (`confirm`, librdkafka's
`on_commit`). A commit it refused, or an older commit it applied after a newer one (a
request retried by the client after a lost connection lands after the ones sent
meanwhile), leaves an older offset committed than the one stored: while messages keep
coming the next batch's commit covers it, but once the input runs dry nothing would, and a
restart or rebalance would read every message since again (the uuid absorbs them, at the
cost of the re-read). So each partition's newest offset handed over and the broker's
latest answer are kept, and `settle()` (the consumer calls it when a fetch comes back
empty, and before it closes) commits the newest offset again for each partition still
assigned whose answer was a refusal or went backwards. A partition revoked is forgotten
(`forget`, the consumer's `on_revoke`): its new owner commits it from then on, and an old
offset sent for it later could undo that owner's work.

So a commit is only ever sent for partitions the consumer still holds. A batch can be
written while a rebalance takes its partition (the revocation runs inside the fetch that
overlaps the write, or while a write waits out a database outage), and its commit comes
after. The broker does not check who holds a partition (only the group's generation, which
a cooperative rebalance leaves current for the partitions kept), so that commit was
applied: it set the group's offset back behind what the new owner had committed, and once
the input ran dry nothing moved it forward again (tests/integration/test_inbox_commits.py
has a real broker do so). The partitions no longer assigned are left out of the commit
(`withheld` counts them); the new owner reads from the group's offset and the unique uuid
absorbs what was stored twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from outbox_engine.inbox.kafka_thread import ConsumerThread
from outbox_engine.transports.kafka_logs import REPEATS

log = logging.getLogger("outbox_engine.inbox.consumer")

Key = tuple[str, int]


class OffsetCommits:
    """The offset commits of one consumer, sent one after the other on its Kafka thread.

    The bookkeeping (`_newest`, `_answered`, `_unsettled`) is touched on that thread only:
    `_commit`, `confirm` (librdkafka calls it inside a fetch), `forget` and `_resend`."""

    def __init__(
        self,
        thread: ConsumerThread,
        on_error: Callable[[KafkaError | None, list[TopicPartition]], None],
    ) -> None:
        self._on_error = on_error
        self._thread = thread
        self._last: asyncio.Future[None] | None = None
        self._newest: dict[Key, int] = {}
        self._answered: dict[Key, int] = {}
        self._unsettled: set[Key] = set()
        self.sent = 0
        # Commits sent again by `settle` (each covers every partition it found unsettled).
        self.resent = 0
        # Partition offsets left out of a commit: no longer assigned when it was sent.
        self.withheld = 0

    def send(self, consumer: Consumer, offsets: list[TopicPartition]) -> None:
        """Commit `offsets` (asynchronously: answered through `confirm`) after every commit
        handed over before; returns at once."""
        self._last = self._thread.call(self._commit, consumer, offsets)

    def settle(self, consumer: Consumer) -> None:
        """Commit the newest offsets again where the broker refused or went back (see the
        module's docstring), after every commit handed over before; returns at once, and
        at once when there is nothing to settle (read from the loop: a partition marked
        just after is settled the next time)."""
        if self._unsettled:
            self._last = self._thread.call(self._resend, consumer)

    def _commit(self, consumer: Consumer, offsets: list[TopicPartition]) -> None:
        for tp in offsets:
            self._newest[(tp.topic, tp.partition)] = tp.offset
        try:
            offsets = self._held(consumer, offsets)
        except Exception:  # the client cannot say what it holds: try again when settling
            self._unsettled.update((tp.topic, tp.partition) for tp in offsets)
            log.exception("reading the consumer's assignment failed; not committing now")
            return
        if not offsets:
            return
        try:
            consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as exc:
            # The batch is stored: a commit that is lost only means it is read again, and
            # the unique uuid absorbs it; `settle` tries again once the input runs dry.
            self._unsettled.update((tp.topic, tp.partition) for tp in offsets)
            self._on_error(exc.args[0], offsets)
        except Exception:  # a commit must never stop the next ones
            log.exception("offset commit failed; the batch will be read again")
        self.sent += 1

    def _held(self, consumer: Consumer, offsets: list[TopicPartition]) -> list[TopicPartition]:
        """The offsets of the partitions the consumer still holds (see the module's
        docstring); the others are logged and forgotten. On the Kafka thread, as the
        revocations are, so the assignment read here is the one the commit goes out under."""
        assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        held = [tp for tp in offsets if (tp.topic, tp.partition) in assigned]
        if len(held) < len(offsets):
            gone = [tp for tp in offsets if (tp.topic, tp.partition) not in assigned]
            for tp in gone:
                self._drop((tp.topic, tp.partition))
            self.withheld += len(gone)
            REPEATS.log(
                log,
                logging.INFO,
                "not committing "
                + ", ".join(f"{tp.topic}[{tp.partition}] ({tp.offset})" for tp in gone)
                + ": no longer assigned to this consumer (a rebalance took them while the "
                "batch was stored); their new owner reads from the group's offset",
                key="commit withheld: partition no longer assigned",
            )
        return held

    def confirm(self, error: KafkaError | None, partitions: list[TopicPartition]) -> list[str]:
        """Record the broker's answer to a commit; returns what went wrong, one line per
        partition (empty: the commit holds)."""
        problems: list[str] = []
        for tp in partitions:
            key = (tp.topic, tp.partition)
            if error is not None or tp.error is not None:
                self._unsettled.add(key)
                problems.append(f"{tp.topic}[{tp.partition}] refused: {error or tp.error}")
                continue
            before = self._answered.get(key)
            self._answered[key] = tp.offset
            if before is not None and tp.offset < before:
                self._unsettled.add(key)
                problems.append(
                    f"{tp.topic}[{tp.partition}] went back from offset {before} to {tp.offset}"
                )
            elif tp.offset == self._newest.get(key):
                self._unsettled.discard(key)
        return problems

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """The partitions are no longer this consumer's: never commit them again."""
        for tp in partitions:
            self._drop((tp.topic, tp.partition))

    def _drop(self, key: Key) -> None:
        self._newest.pop(key, None)
        self._answered.pop(key, None)
        self._unsettled.discard(key)

    def _resend(self, consumer: Consumer) -> None:
        assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        due = [key for key in self._unsettled if key in assigned and key in self._newest]
        for key in self._unsettled - set(due):
            self._drop(key)
        self._unsettled.clear()
        if not due:
            return
        offsets = [TopicPartition(topic, part, self._newest[topic, part]) for topic, part in due]
        # Once per failed answer at most, so at most once a fetch while the broker refuses:
        # summarised like the client's own lines.
        REPEATS.log(
            log,
            logging.INFO,
            "committing again the newest offsets of "
            + ", ".join(f"{tp.topic}[{tp.partition}] ({tp.offset})" for tp in offsets),
            key=f"commit again {sorted(due)}",
        )
        self.resent += 1
        self._commit(consumer, offsets)

    async def drain(self) -> None:
        """Wait until every commit handed over has been sent."""
        if self._last is not None:
            last, self._last = self._last, None
            await last
