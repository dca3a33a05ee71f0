"""Rows -> inbox table -> offsets: the consumer's writes, one batch at a time, in order.

A batch is stored with one statement (store/inbox.py) and only then are its offsets
committed, so nothing is acknowledged before it is stored; a crash in between means Kafka
redelivers and the unique uuid absorbs the duplicates. While a batch is written the next
one is turned into rows and encoded (`store` starts the write and yields, and yields while
it builds rows, so the write's reply is handled at once); the next write starts once the
previous one is stored, its offset commit handed to the consumer's Kafka thread
(inbox/commits.py: a commit waits for the fetch in flight); `flush` waits for both. A batch
the database is unavailable for is retried whole, unacknowledged, until it stores
(readiness says why meanwhile); a batch whose data is refused (SQLSTATE 22, 23, 54) is
stored row by row, a refused row reduced to an "unstorable" one. The insert judges the
rows that were not new; those with a message-id clash (inbox/clash.py) are stored as
rejected rows of their own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from outbox_engine.config.registry import Box
from outbox_engine.inbox.clash import ClashCheck
from outbox_engine.inbox.commits import OffsetCommits
from outbox_engine.inbox.kafka_thread import ConsumerThread
from outbox_engine.inbox.readiness import ConsumerHealth
from outbox_engine.inbox.rows import REJECTED_HEADER, message_row, unstorable_row
from outbox_engine.observability.observer import Observer
from outbox_engine.store.inbox import Encoded, InboxStatements, Inserted, encode
from outbox_engine.store.pgconn import DriverConnections, is_data_error, is_unavailable
from outbox_engine.transports.kafka_logs import REPEATS

# The consumer's lines keep the logger they always had (log filters and dashboards use it).
log = logging.getLogger("outbox_engine.inbox.consumer")

# An insert that takes longer is abandoned (its connection dropped) and the batch retried.
STATEMENT_TIMEOUT = 60.0
# While a batch's rows are built, the write in flight gets a turn every this many messages.
YIELD_EVERY = 64


class BatchWriter:
    """Stores the batches of one inbox consumer and commits their offsets."""

    def __init__(
        self,
        box: Box,
        connections: DriverConnections,
        observer: Observer,
        health: ConsumerHealth,
        thread: ConsumerThread,
    ) -> None:
        self.box = box
        self.observer = observer
        self.health = health
        self._connections = connections
        self._statements = InboxStatements(box.table_name, box.channel, REJECTED_HEADER)
        self._clashes = ClashCheck(self._statements, REJECTED_HEADER)
        self._writing: asyncio.Task[None] | None = None
        self._commits = OffsetCommits(thread, self.on_commit)
        self.stored = 0
        self.received = 0
        # Messages whose id was taken by a different payload (stored as rejected rows).
        self.clashes = 0

    def on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """librdkafka's answer to a commit (on the Kafka thread, inside a fetch)."""
        problems = self._commits.confirm(error, partitions)
        if problems:
            # Usually a rebalance took the partitions: the new owner re-reads and the unique
            # uuid drops what we already stored. Otherwise `settle` commits again.
            REPEATS.log(
                log,
                logging.WARNING,
                f"inbox {self.box.name}: offset commit not held ({'; '.join(problems)}); "
                "the newest offsets are committed again once the input runs dry",
                key=f"inbox {self.box.name}: offset commit not held",
            )

    def forget(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """The consumer's `on_revoke`: never commit these partitions again."""
        self._commits.forget(partitions)

    @property
    def resent_commits(self) -> int:
        """Commits `settle` sent again (inbox/commits.py)."""
        return self._commits.resent

    def settle(self, consumer: Consumer) -> None:
        """Commit the newest offsets again where the broker refused or went back
        (inbox/commits.py); returns at once."""
        self._commits.settle(consumer)

    async def _insert_rows(self, rows: list[dict[str, Any]]) -> Inserted:
        async with self._connections.acquire() as conn:
            return await self._statements.insert(conn, rows, STATEMENT_TIMEOUT)

    async def _insert_encoded(self, batch: Encoded) -> Inserted:
        async with self._connections.acquire() as conn:
            return await self._statements.insert_encoded(conn, batch, STATEMENT_TIMEOUT)

    async def _insert_one_by_one(self, rows: list[dict[str, Any]]) -> Inserted:
        result = Inserted()
        for index, row in enumerate(rows):
            try:
                result.add(await self._insert_rows([row]), index)
            except Exception as exc:
                if not is_data_error(exc):
                    raise
                log.warning(
                    "inbox %s: message at %s/%s refused by the database: %s",
                    self.box.name,
                    row["source_topic"],
                    row["source_offset"],
                    exc,
                )
                result.add(await self._insert_rows([unstorable_row(row, exc)]), index)
        return result

    async def _store_clashes(self, rows: list[dict[str, Any]], result: Inserted) -> int:
        """Store the rows whose id is taken by a different payload as rejected rows of their
        own (see inbox/clash.py): those the insert judged so, and those of the rows it could
        not judge that a check of their own finds. Returns the rows stored."""
        while True:
            try:
                clashes = list(result.clashes)
                if result.unjudged:
                    unjudged = [rows[i] for i in result.unjudged]
                    async with self._connections.acquire() as conn:
                        found = await self._clashes.find(conn, unjudged, STATEMENT_TIMEOUT)
                    clashes = sorted(clashes + [result.unjudged[i] for i in found])
                if not clashes:
                    return 0
                clash_rows = [self._clashes.clash_row(rows[i]) for i in clashes]
                for row in clash_rows:
                    log.warning(
                        "inbox %s: %s",
                        self.box.name,
                        row["headers"][REJECTED_HEADER],
                    )
                self.clashes += len(clash_rows)
                return (await self._insert_rows(clash_rows)).new
            except Exception as exc:
                if not is_unavailable(exc):
                    raise
                log.error(
                    "inbox %s: database unavailable while checking message ids (%s); retrying",
                    self.box.name,
                    exc,
                )
                await asyncio.sleep(1.0)

    async def store(self, consumer: Consumer, messages: Sequence[Message]) -> None:
        rows = []
        offsets: dict[tuple[str, int], int] = {}
        for n, message in enumerate(messages, 1):
            if n % YIELD_EVERY == 0:
                await asyncio.sleep(0)
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    log.warning("inbox %s: consume error: %s", self.box.name, error)
                continue
            row = message_row(self.box, message)
            row["headers"].update(
                self.observer.received(
                    self.box,
                    row["source_topic"],
                    row["source_partition"],
                    row["source_offset"],
                    row["headers"],
                )
            )
            rows.append(row)
            tp = (message.topic() or "", message.partition() or 0)
            offsets[tp] = max(offsets.get(tp, -1), (message.offset() or 0) + 1)
        if not rows:
            return
        batch = encode(rows)
        # This batch's rows were made while the previous batch was written; its write
        # starts once that one is stored (writes stay in order, and their commits).
        await self._written()
        self._writing = asyncio.create_task(self._write(consumer, rows, batch, offsets))
        # Let the write start now: it sends its statement and waits on the database while
        # the next batch is turned into rows. (Without this yield the task would only start
        # at the next `flush()`, after those rows: no overlap at all; 17k -> 22k rows/s.)
        await asyncio.sleep(0)

    async def _written(self) -> None:
        if self._writing is not None:
            writing, self._writing = self._writing, None
            await writing

    async def flush(self) -> None:
        """Wait until every batch handed to `store` is stored and its offsets committed
        (the commit sent; the broker confirms it through `on_commit`)."""
        await self._written()
        await self._commits.drain()

    async def _write(
        self,
        consumer: Consumer,
        rows: list[dict[str, Any]],
        batch: Encoded,
        offsets: dict[tuple[str, int], int],
    ) -> None:
        self.received += len(rows)
        while True:
            try:
                try:
                    result = await self._insert_encoded(batch)
                except Exception as exc:
                    if not is_data_error(exc):
                        raise
                    # The data of some message is refused: store row by row, the refused
                    # ones reduced.
                    result = await self._insert_one_by_one(rows)
                break
            except Exception as exc:
                if not is_unavailable(exc):
                    raise
                # Keep the batch: it is not acknowledged, so retrying loses and doubles nothing.
                self.health.db_problem = f"cannot store ({type(exc).__name__}: {exc})"
                self.health.update_ready()
                REPEATS.log(
                    log,
                    logging.ERROR,
                    f"inbox {self.box.name}: database unavailable or refusing writes "
                    f"({type(exc).__name__}: {exc}); retrying the batch of {len(rows)} "
                    "messages, unacknowledged",
                )
                await asyncio.sleep(1.0)
        inserted = result.new
        if result.clashes or result.unjudged:
            inserted += await self._store_clashes(rows, result)
        self.stored += inserted
        self.observer.stored(self.box, len(rows), inserted)
        commit = [
            TopicPartition(topic, partition, offset)
            for (topic, partition), offset in offsets.items()
        ]
        # Sent in order, confirmed in the background (`on_commit`): the batch is stored, so
        # a commit that is lost only means the batch is read again, and the uuid absorbs it.
        self._commits.send(consumer, commit)
