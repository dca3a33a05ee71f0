"""One relay step for one box: claim a batch, deliver it, record the outcomes.

Two short transactions and no transaction open during network I/O:

1. claim: read up to `batch_size` pending, due items of the owned buckets, each bucket in id
   order (an index range scan over the partial index of pending rows);
2. deliver: hand items to their transports, items of one key strictly in id order;
3. record: one transaction marks delivered / retried / failed / discarded items.

Ownership of the buckets (see ownership.py) is what makes the claim exclusive, so claimed
rows need no "processing" status: a crash between 1 and 3 leaves them pending, and the next
owner sends them again (at-least-once, same message id).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import functools
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from outbox_engine.config.registry import Box
from outbox_engine.creation.chain import handling
from outbox_engine.creation.items import pending_created
from outbox_engine.creation.shards import COALESCE_HEADER, OBJECT_HEADER
from outbox_engine.inbox.consumer import REJECTED_HEADER
from outbox_engine.middleware import Middlewares, run_batch_chain, run_item_chain
from outbox_engine.observability.observer import Observer, ProcessScope
from outbox_engine.relay.retry import decide
from outbox_engine.store.pgconn import DriverConnections, asyncpg_sql
from outbox_engine.store.record import FailedAttempt, Recorder
from outbox_engine.store.status import ItemStatus
from outbox_engine.transports.base import (
    InboxHandler,
    ItemRecord,
    PermanentFailure,
    PipelinedTransport,
    Transport,
    TransportUnavailable,
)

log = logging.getLogger(__name__)

MAX_ERROR_LENGTH = 2000
# A claim or record statement that takes longer is abandoned (its connection dropped) and
# retried: a connection whose server vanished without closing it must not hang a lane.
STATEMENT_TIMEOUT = 60.0
# Every statement of the relay reads through an index (the pending index, the primary key,
# the uuid or (event_key, id) index); a generic plan made while the table looked empty would
# read the whole table instead, on every claim, until the next ANALYZE (see pgconn.py).
RELAY_SESSION_SETTINGS = {"enable_seqscan": "off"}


class Result(enum.Enum):
    DELIVERED = "delivered"
    FAILED = "failed"
    PERMANENT = "permanent"
    UNAVAILABLE = "unavailable"
    DEFERRED = "deferred"
    DISCARDED = "discarded"


@dataclass(slots=True)
class Slot:
    """The state of one item during delivery."""

    item: ItemRecord
    payload: bytes
    result: Result = Result.DEFERRED
    error: str = ""
    # Only the per-item path (ordered hand-over between items of a key) needs an event;
    # the pipelined path never creates one.
    _released: asyncio.Event | None = None
    released_ok: bool = False
    recorded: bool = False
    scope: ProcessScope | None = None

    @property
    def released(self) -> asyncio.Event:
        if self._released is None:
            self._released = asyncio.Event()
        return self._released

    def start(self, observer: Observer, box: Box) -> None:
        """Open the item's processing scope; what it sends carries the scope's context."""
        self.scope = observer.processing(box, self.item)
        if self.scope.headers:
            self.item = dataclasses.replace(
                self.item, headers={**self.item.headers, **self.scope.headers}
            )

    def finish(self, error: BaseException | None = None) -> None:
        if self.scope is not None:
            self.scope.end(error)
            self.scope = None

    def release(self) -> None:
        self.released_ok = True
        self.released.set()


@dataclass
class BatchReport:
    claimed: int = 0
    delivered: int = 0
    failed_attempts: int = 0
    dead: int = 0
    discarded: int = 0
    deferred: int = 0
    unavailable: int = 0

    @property
    def full(self) -> bool:
        return self.claimed > 0


class TransportFailed(Exception):
    """A transport returned False."""


def _error_text(exc: BaseException) -> str:
    # Never the statement, its parameters or payload values (see failures.py).
    from outbox_engine.relay.failures import failure_text

    return failure_text(exc)[:MAX_ERROR_LENGTH]


class BoxProcessor:
    def __init__(
        self,
        box: Box,
        engine: AsyncEngine,
        session_factory: async_sessionmaker[AsyncSession],
        middlewares: Middlewares,
        observer: Observer | None = None,
        keep_connections: bool = False,
    ) -> None:
        self.box = box
        # A worker's processor keeps its connections between batches.
        self._connections = DriverConnections(
            engine, keep=keep_connections, settings=RELAY_SESSION_SETTINGS
        )
        self.engine = engine
        self.session_factory = session_factory
        self.middlewares = middlewares
        self.observer = observer or Observer()
        self._rotation = 0
        # Outcomes dropped by the fence since start (see record.py): tests and stats read it.
        self.fenced_total = 0
        # Strict-order gaps a pipelined transport left (see _hold_keys_behind_failures).
        self.order_gaps = 0
        self.config = box.config
        table = box.table_name
        inbox_columns = (
            ", t.source_topic, t.source_partition, t.source_offset" if box.kind == "inbox" else ""
        )
        # A strict box holds a key back behind an older item that is in backoff or failed for
        # good: the claim skips those keys at the database (a probe of the small partial
        # index of such rows, see models.BLOCKING_ROWS), so a key in backoff never fills a
        # bucket's claim with items that cannot go and never starves the bucket's other keys.
        blocked = (
            f"""AND NOT EXISTS (SELECT 1 FROM {table} f WHERE f.event_key = t.event_key
                AND f.id < t.id AND (f.status = {int(ItemStatus.FAILED)}
                    OR (f.status = {int(ItemStatus.PENDING)} AND f.next_attempt_at IS NOT NULL
                        AND f.next_attempt_at > now())))"""
            if self.config.strict_order
            else ""
        )
        self._claim_sql = asyncpg_sql(
            f"""
            SELECT i.* FROM unnest(CAST(:buckets AS integer[])) WITH ORDINALITY AS b(bucket, ord)
            CROSS JOIN LATERAL (
                SELECT t.id, t.uuid, t.event_name, t.event_key, t.bucket, t.payload, t.headers,
                       t.errors_count, t.created_at{inbox_columns}
                FROM {table} t
                WHERE t.bucket >= b.bucket AND t.bucket <= b.bucket
                  AND t.status = {int(ItemStatus.PENDING)}
                  AND (t.next_attempt_at IS NULL OR t.next_attempt_at <= now()) {blocked}
                  AND t.event_key <> ALL(CAST(:paused_keys AS text[]))
                ORDER BY t.bucket, t.id
                LIMIT :per_bucket
            ) AS i
            LIMIT :limit
            """,
            "buckets",
            "per_bucket",
            "limit",
            "paused_keys",
        )
        # Coalescing: an item is dropped when a newer item of the same object (same shard
        # key, category and object identifier) is pending or delivered.
        self._coalesce_sql = text(
            f"""
            SELECT r.id FROM unnest(CAST(:ids AS bigint[]), CAST(:keys AS text[]),
                                    CAST(:names AS text[]), CAST(:objects AS text[])) AS r(id, k, e, o)
            WHERE EXISTS (SELECT 1 FROM {table} t WHERE t.event_key = r.k AND t.event_name = r.e
                          AND t.id > r.id AND t.headers->>'{OBJECT_HEADER}' = r.o
                          AND t.status IN ({int(ItemStatus.PENDING)}, {int(ItemStatus.DELIVERED)}))
            """
        )
        # The synchronous flush (flush.py) delivers only an item that heads its key: no older
        # item of its key pending (other than the flushed ones) or, in a strict box, failed.
        # Pauses and bucket ownership are the flusher's to check.
        older = f"p.status = {int(ItemStatus.FAILED)} OR " if self.config.strict_order else ""
        self._claim_ids_sql = asyncpg_sql(
            f"""
            SELECT t.id, t.uuid, t.event_name, t.event_key, t.bucket, t.payload, t.headers,
                   t.errors_count, t.created_at{inbox_columns}
            FROM {table} t
            WHERE t.uuid = ANY(CAST(:uuids AS uuid[])) AND t.status = {int(ItemStatus.PENDING)}
              AND (t.next_attempt_at IS NULL OR t.next_attempt_at <= now())
              AND t.event_key <> ALL(CAST(:paused_keys AS text[]))
              AND NOT EXISTS (SELECT 1 FROM {table} p WHERE p.event_key = t.event_key
                              AND p.id < t.id AND ({older}(p.status = {int(ItemStatus.PENDING)}
                              AND p.uuid <> ALL(CAST(:uuids AS uuid[])))))
            ORDER BY t.bucket, t.id
            """,
            "uuids",
            "paused_keys",
        )
        self._superseded_sql = text(
            f"""
            SELECT r.id FROM unnest(CAST(:ids AS bigint[]), CAST(:keys AS text[]),
                                    CAST(:names AS text[])) AS r(id, k, e)
            WHERE EXISTS (SELECT 1 FROM {table} t WHERE t.event_key = r.k AND t.event_name = r.e
                          AND t.id > r.id AND t.status = {int(ItemStatus.DELIVERED)})
            """
        )
        self._recorder = Recorder(table, box.name)
        pending = int(ItemStatus.PENDING)
        # An inbox batch's first statement, in the transaction its handlers write in: lock the
        # claimed rows still pending. A row another worker holds (it is handling it now) is
        # skipped, not waited for; a row no longer pending, or attempted since the claim, is
        # not returned: either way its handler does not run here.
        self._lock_inbox_sql = text(
            f"SELECT id, errors_count FROM {table} WHERE id = ANY(CAST(:ids AS bigint[])) "
            f"AND status = {pending} FOR UPDATE SKIP LOCKED"
        )
        self._inbox_delivered_sql = text(
            f"UPDATE {table} SET status = {int(ItemStatus.DELIVERED)}, processed_at = now(), "
            f"next_attempt_at = NULL WHERE id = :id AND status = {pending}"
        )

    # -- claim ---------------------------------------------------------------------------

    async def claim(
        self, buckets: Sequence[int], paused_keys: Collection[str] = ()
    ) -> list[tuple[ItemRecord, bytes]]:
        limit = self.config.batch_size
        per_bucket = min(limit, max(8, math.ceil(limit / max(len(buckets), 1)) * 4))
        # The nested loop stops at `limit`: start each claim at the next bucket, so that a
        # deep bucket cannot starve the ones after it.
        self._rotation = (self._rotation + 1) % max(len(buckets), 1)
        buckets = [*buckets[self._rotation :], *buckets[: self._rotation]]
        async with self._connections.acquire() as conn:
            rows = await conn.fetch(
                self._claim_sql,
                list(buckets),
                per_bucket,
                limit,
                list(paused_keys),
                timeout=STATEMENT_TIMEOUT,
            )
        # Each key's items in id order whatever plan the database chose.
        rows.sort(key=_bucket_and_id)
        return [(self._record(row), row[5]) for row in rows]

    def _record(self, row: Any) -> ItemRecord:
        """An ItemRecord of a claimed row (columns by position, see the claim SQL)."""
        if self.box.kind == "inbox":
            return ItemRecord(
                row[0],
                row[1],
                self.box.name,
                row[2],
                row[3],
                row[4],
                _headers(row[6]),
                row[7],
                row[8],
                source_topic=row[9],
                source_partition=row[10],
                source_offset=row[11],
            )
        return ItemRecord(
            row[0], row[1], self.box.name, row[2], row[3], row[4], _headers(row[6]), row[7], row[8]
        )

    # -- one step ------------------------------------------------------------------------

    async def run_once(
        self,
        buckets: Sequence[int],
        paused_keys: Collection[str] = (),
        owns: Callable[[int], bool] | None = None,
    ) -> BatchReport:
        """Relay one batch; items of `paused_keys` (the kill switch) stay pending, untouched.

        `owns(bucket)` is asked again once the claim returns: items of a bucket this worker
        lost meanwhile (its lock connection dropped) are left alone for the new owner."""
        report = BatchReport()
        if not buckets:
            return report
        claimed = await self.claim(buckets, paused_keys)
        if owns is not None:
            claimed = [(item, payload) for item, payload in claimed if owns(item.bucket)]
        await self._process(claimed, report)
        return report

    async def process_ids(
        self, message_ids: Sequence[UUID], paused_keys: Collection[str] = ()
    ) -> dict[UUID, Slot]:
        """Deliver these items now (synchronous flush; the caller holds their buckets' locks),
        each only if it heads its key: an item with an older pending (or, in a strict box,
        failed) item of its key is left to the worker, in order; paused keys are left too."""
        async with self._connections.acquire() as conn:
            rows = await conn.fetch(
                self._claim_ids_sql,
                list(message_ids),
                list(paused_keys),
                timeout=STATEMENT_TIMEOUT,
            )
        claimed = [(self._record(row), row[5]) for row in rows]
        slots = await self._process(claimed, BatchReport())
        return {slot.item.uuid: slot for slot in slots}

    async def _process(
        self, claimed: list[tuple[ItemRecord, bytes]], report: BatchReport
    ) -> list[Slot]:
        report.claimed = len(claimed)
        if not claimed:
            return []
        started = time.monotonic()
        self.observer.claimed(self.box, len(claimed))
        slots = [Slot(item, payload) for item, payload in claimed]
        discards: list[tuple[Slot, str]] = []
        live: list[Slot] = []
        for slot in slots:
            if slot.item.hop > self.config.max_hops:
                slot.result = Result.PERMANENT
                slot.error = (
                    f"hop limit exceeded: hop {slot.item.hop} > max_hops {self.config.max_hops}"
                )
            elif self.box.kind == "inbox" and REJECTED_HEADER in slot.item.headers:
                slot.result = Result.PERMANENT
                slot.error = f"rejected by the consumer: {slot.item.headers[REJECTED_HEADER]}"
            elif not self.box.transports_for(slot.item.event_name):
                slot.result = Result.PERMANENT
                slot.error = f"no transport configured for event {slot.item.event_name!r} in box {self.box.name}"
            else:
                live.append(slot)
        if "latest_available" in self.config.retry_strategies:
            live, discards = await self._drop_superseded(live)
        if any(s.item.headers.get(COALESCE_HEADER) for s in live):
            live, coalesced = await self._coalesce(live)
            discards += coalesced

        async def deliver() -> None:
            await self._deliver(live)

        await run_batch_chain(self.middlewares.batch, self.box, [s.item for s in live], deliver)
        await self._record_outcomes(slots, discards, report)
        self._observe_outcomes(slots, discards, time.monotonic() - started)
        for slot, reason in discards:
            slot.result, slot.error = Result.DISCARDED, reason
        return slots

    def _observe_outcomes(
        self, slots: list[Slot], discards: list[tuple[Slot, str]], seconds: float
    ) -> None:
        discarded = {s.item.id for s, _ in discards}
        results: list[tuple[ItemRecord, str]] = []
        for slot in slots:
            if slot.item.id in discarded:
                outcome = "discarded"
            elif slot.result in (Result.FAILED, Result.PERMANENT):
                dead = (
                    slot.result is Result.PERMANENT
                    or slot.item.errors_count + 1 > self.config.max_retries
                )
                outcome = "dead" if dead else "failed"
            else:
                outcome = slot.result.value
            results.append((slot.item, outcome))
        self.observer.outcomes(self.box, results, seconds)

    async def _coalesce(self, slots: list[Slot]) -> tuple[list[Slot], list[tuple[Slot, str]]]:
        candidates = [s for s in slots if s.item.headers.get(COALESCE_HEADER)]
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                self._coalesce_sql,
                {
                    "ids": [s.item.id for s in candidates],
                    "keys": [s.item.event_key for s in candidates],
                    "names": [s.item.event_name for s in candidates],
                    "objects": [str(s.item.headers.get(OBJECT_HEADER, "")) for s in candidates],
                },
            )
            newer_exists = {row[0] for row in rows}
            await conn.rollback()
        reason = "coalesced: a newer item of the same object supersedes it"
        return (
            [s for s in slots if s.item.id not in newer_exists],
            [(s, reason) for s in slots if s.item.id in newer_exists],
        )

    async def _drop_superseded(
        self, slots: list[Slot]
    ) -> tuple[list[Slot], list[tuple[Slot, str]]]:
        retries = [s for s in slots if s.item.errors_count > 0]
        if not retries:
            return slots, []
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                self._superseded_sql,
                {
                    "ids": [s.item.id for s in retries],
                    "keys": [s.item.event_key for s in retries],
                    "names": [s.item.event_name for s in retries],
                },
            )
            superseded = {row[0] for row in rows}
            await conn.rollback()
        kept = [s for s in slots if s.item.id not in superseded]
        dropped = [
            (s, "latest_available: a newer item of this key and event was delivered")
            for s in slots
            if s.item.id in superseded
        ]
        return kept, dropped

    # -- deliver -------------------------------------------------------------------------

    async def _deliver(self, slots: list[Slot]) -> None:
        if not slots:
            return
        if self.box.kind == "inbox":
            await self._deliver_inbox(slots)
            return
        if self._fast_path(slots):
            await self._deliver_pipelined(slots)
            if self.config.strict_order:
                self._hold_keys_behind_failures(slots)
            return
        previous: dict[str, Slot] = {}
        tasks = []
        for slot in slots:
            prev = previous.get(slot.item.event_key)
            previous[slot.item.event_key] = slot
            tasks.append(asyncio.ensure_future(self._deliver_one(slot, prev)))
        await asyncio.gather(*tasks)

    def _fast_path(self, slots: list[Slot]) -> bool:
        """Every item goes to pipelined transports only, no item middlewares; in a strict box
        only transports that also fail in order (see `PipelinedTransport.fails_in_order`)."""
        if self.box.kind != "outbox" or self.middlewares.item:
            return False
        strict = self.config.strict_order
        return all(
            isinstance(t, PipelinedTransport) and (t.fails_in_order or not strict)
            for slot in slots
            for t in self.box.transports_for(slot.item.event_name)
        )

    def _hold_keys_behind_failures(self, slots: list[Slot]) -> None:
        """Strict order after a pipelined batch: behind a key's first item that was not
        delivered, the key's later items count as not attempted (they go again after it).
        One of them delivered anyway is a gap in the key's order: an error, counted."""
        stopped: set[str] = set()
        for slot in slots:
            key = slot.item.event_key
            if key not in stopped:
                if slot.result is not Result.DELIVERED:
                    stopped.add(key)
                continue
            if slot.result is Result.DELIVERED:
                self.order_gaps += 1
                self.observer.order_gap(self.box, slot.item)
                log.error(
                    "box %s: item %s of key %r was delivered after an earlier item of its key "
                    "failed in the same batch (the transport did not fail in order)",
                    self.box.name,
                    slot.item.id,
                    key,
                )
            else:
                slot.result, slot.error = Result.DEFERRED, ""

    async def _deliver_pipelined(self, slots: list[Slot]) -> None:
        """Hand the whole batch to each transport in id order and wait for all outcomes."""
        # transport -> positions of its slots (most boxes have one transport per event).
        groups: dict[int, tuple[PipelinedTransport, list[int]]] = {}
        for position, slot in enumerate(slots):
            slot.start(self.observer, self.box)
            for transport in self.box.transports_for(slot.item.event_name):
                assert isinstance(transport, PipelinedTransport)
                group = groups.get(id(transport))
                if group is None:
                    group = groups[id(transport)] = (transport, [])
                group[1].append(position)
        calls: list[Awaitable[Sequence[BaseException | bool | None]]] = []
        for transport, positions in groups.values():
            try:
                calls.append(
                    transport.enqueue_many([(slots[p].item, slots[p].payload) for p in positions])
                )
            except Exception as exc:
                calls.append(_failed_all(exc, len(positions)))
        timeout = self.config.transport_timeout_seconds
        try:
            results: list[
                Sequence[BaseException | bool | None] | BaseException
            ] = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), timeout)
        except TimeoutError:
            results = [TimeoutError(f"no delivery report within {timeout:g}s")] * len(calls)
        errors: list[BaseException | None] = [None] * len(slots)
        refused = [False] * len(slots)
        for (_transport, positions), outcome in zip(groups.values(), results, strict=True):
            if isinstance(outcome, BaseException):
                for position in positions:
                    errors[position] = errors[position] or outcome
                continue
            for position, result in zip(positions, outcome, strict=True):
                if isinstance(result, BaseException):
                    errors[position] = errors[position] or result
                elif result is False:
                    refused[position] = True
        for slot, error, was_refused in zip(slots, errors, refused, strict=True):
            if error is not None:
                self._set_failure(slot, error)
            elif was_refused:
                error = TransportFailed("transport returned False")
                self._set_failure(slot, error)
            else:
                slot.result = Result.DELIVERED
            slot.finish(error)

    async def _deliver_one(self, slot: Slot, prev: Slot | None) -> None:
        try:
            if prev is not None:
                await prev.released.wait()
                if not prev.released_ok:
                    slot.result = Result.DEFERRED  # keep the key's order: wait for the next batch
                    return

            async def innermost() -> None:
                await self._send(slot)

            slot.start(self.observer, self.box)
            await run_item_chain(self.middlewares.item, self.box, slot.item, innermost)
            slot.result = Result.DELIVERED
            slot.finish()
        except Exception as exc:
            self._set_failure(slot, exc)
            slot.finish(exc)
        finally:
            if slot.result is Result.DELIVERED:
                slot.release()
            slot.released.set()

    async def _send(self, slot: Slot) -> None:
        timeout = self.config.transport_timeout_seconds
        pending: list[Awaitable[Any]] = []
        for transport in self.box.transports_for(slot.item.event_name):
            if isinstance(transport, PipelinedTransport) and not self.config.strict_order:
                pending.append(transport.enqueue(slot.item, slot.payload))
            else:
                assert isinstance(transport, Transport)
                _check(await asyncio.wait_for(transport(slot.item, slot.payload), timeout))
        # Later items of this key may be handed over now: the transports keep their order.
        if not self.config.strict_order:
            slot.release()
        for future in pending:
            _check(await asyncio.wait_for(future, timeout))

    async def _deliver_inbox(self, slots: list[Slot]) -> None:
        """Run the handlers of a batch in one transaction, each item in its own savepoint.

        A handler's writes and its item's status change commit together (effectively once);
        a failing handler rolls back only its savepoint. One commit per batch instead of
        one per item is what makes the inbox fast. If the batch transaction itself fails,
        nothing of it committed: every handled item stays pending and is handled again.
        """
        handled: list[Slot] = []
        failed_keys: set[str] = set()
        fenced = 0
        try:
            async with self.session_factory() as session, session.begin():
                # Handlers run only on rows locked here and found as claimed (pending, same
                # attempt count): two workers can never both apply one item.
                result = await session.execute(
                    self._lock_inbox_sql, {"ids": [s.item.id for s in slots]}
                )
                locked: dict[int, int] = {row[0]: row[1] for row in result}
                for slot in slots:
                    if slot.item.event_key in failed_keys:
                        continue  # keep the key's order: the rest waits for the next batch
                    if locked.get(slot.item.id) != slot.item.errors_count:
                        fenced += 1
                        failed_keys.add(slot.item.event_key)
                        continue
                    created = pending_created(session)
                    created_before = len(created)
                    slot.start(self.observer, self.box)
                    try:
                        assert slot.scope is not None
                        with slot.scope:
                            await run_item_chain(
                                self.middlewares.item,
                                self.box,
                                slot.item,
                                functools.partial(self._handle_inbox, slot, session),
                            )
                    except Exception as exc:
                        del created[created_before:]  # rolled back with the savepoint
                        self._set_failure(slot, exc)
                        slot.finish(exc)
                        failed_keys.add(slot.item.event_key)
                        if not session.in_transaction():
                            break
                        continue
                    slot.finish()
                    slot.result = Result.DELIVERED
                    handled.append(slot)
        except Exception as exc:
            await self._inbox_batch_failed(slots, handled, exc)
            return
        for slot in handled:
            slot.recorded = True
        self._fenced(fenced, "handled")

    async def _inbox_batch_failed(
        self, slots: list[Slot], handled: list[Slot], exc: Exception
    ) -> None:
        """The batch transaction failed as a whole (its commit, or the session), so nothing
        of it committed. An outage or a lost conflict: every item stays pending, to be
        handled again. Anything else (a constraint checked at commit, a trigger's
        exception) would fail the same batch again on every claim: run its items again one
        per transaction, so the refusal lands on the item that causes it, as a failed
        attempt that retries and backoff bound."""
        from outbox_engine.relay.failures import is_transient

        text = _error_text(exc)  # never the statement's parameters (payload values)
        if is_transient(exc):
            log.error(
                "box %s: inbox batch transaction failed (%s); its items stay pending",
                self.box.name,
                text,
            )
            for slot in handled:
                slot.result = Result.DEFERRED
            return
        if len(slots) == 1:
            slot = slots[0]
            log.error(
                "box %s: inbox item %d refused at commit (%s)", self.box.name, slot.item.id, text
            )
            self._set_failure(slot, exc)
            return
        log.error(
            "box %s: inbox batch transaction failed (%s); handling its %d items one per "
            "transaction to find the one it fails on",
            self.box.name,
            text,
            len(slots),
        )
        stopped: set[str] = set()
        for slot in slots:
            slot.result, slot.error, slot.recorded = Result.DEFERRED, "", False
            if slot.item.event_key in stopped:
                continue  # keep the key's order: the rest waits for the next batch
            await self._deliver_inbox([slot])
            if slot.result is not Result.DELIVERED:
                stopped.add(slot.item.event_key)

    async def _handle_inbox(self, slot: Slot, session: AsyncSession) -> None:
        timeout = self.config.transport_timeout_seconds
        item = slot.item
        async with session.begin_nested():
            with handling(item.correlation_id, str(item.uuid), item.hop):
                for handler in self.box.transports_for(item.event_name):
                    assert isinstance(handler, InboxHandler)
                    _check(
                        await asyncio.wait_for(handler.handle(item, slot.payload, session), timeout)
                    )
            await session.execute(self._inbox_delivered_sql, {"id": item.id})

    def _set_failure(self, slot: Slot, exc: BaseException) -> None:
        from outbox_engine.relay.failures import is_permanent

        if isinstance(exc, TransportUnavailable):
            slot.result = Result.UNAVAILABLE
        elif isinstance(exc, PermanentFailure) or is_permanent(exc):
            # is_permanent: also the database refusing the data itself (overflow, a check).
            slot.result = Result.PERMANENT
        else:
            slot.result = Result.FAILED
        if isinstance(exc, TimeoutError) and not str(exc):
            exc = TimeoutError(f"timed out after {self.config.transport_timeout_seconds:g}s")
        slot.error = _error_text(exc)

    # -- record --------------------------------------------------------------------------

    async def _record_outcomes(
        self, slots: list[Slot], discards: list[tuple[Slot, str]], report: BatchReport
    ) -> None:
        discarded_ids = {s.item.id for s, _ in discards}
        delivered: list[int] = []
        failed: list[FailedAttempt] = []
        park = self.config.strict_order and self.config.poisoned_head == "park"
        for slot in slots:
            if slot.item.id in discarded_ids:
                continue
            if slot.result is Result.DELIVERED:
                report.delivered += 1
                if not slot.recorded:
                    delivered.append(slot.item.id)
            elif slot.result in (Result.FAILED, Result.PERMANENT):
                decision = decide(
                    self.config, slot.item.errors_count, slot.result is Result.PERMANENT
                )
                report.failed_attempts += 1
                report.dead += decision.give_up
                if not decision.give_up:
                    status = ItemStatus.PENDING
                else:
                    status = ItemStatus.PARKED if park else ItemStatus.FAILED
                failed.append(
                    FailedAttempt(
                        slot.item.id,
                        slot.item.errors_count,
                        decision.errors_count,
                        status,
                        slot.error,
                        decision.delay_seconds,
                    )
                )
                if decision.give_up:
                    log.warning(
                        "box %s: item %s (%s) failed for good after %d attempts%s: %s",
                        self.box.name,
                        slot.item.id,
                        slot.item.uuid,
                        decision.errors_count,
                        " (parked: its key moves on)" if park else "",
                        slot.error,
                    )
            elif slot.result is Result.UNAVAILABLE:
                report.unavailable += 1
            else:
                report.deferred += 1
        report.discarded = len(discards)
        if not (delivered or failed or discards):
            return
        async with self._connections.acquire() as conn:
            recorded = await self._recorder.record(
                conn, delivered, failed, [(s.item.id, reason) for s, reason in discards]
            )
        self._fenced(recorded.fenced, "recorded")

    def _fenced(self, count: int, what: str) -> None:
        """Changes dropped because the item was no longer in the state this worker claimed
        it in: another worker took over its bucket and handled it."""
        if not count:
            return
        self.fenced_total += count
        self.observer.fenced(self.box, count)
        log.warning(
            "box %s: %d outcomes not %s: their items changed state since this worker claimed "
            "them (another worker owns the bucket now)",
            self.box.name,
            count,
            what,
        )

    async def close(self) -> None:
        """Return the kept connections to the pool."""
        await self._connections.close()


def _bucket_and_id(row: Any) -> tuple[int, int]:
    return row[4], row[0]


def _headers(value: Any) -> dict[str, Any]:
    # jsonb arrives decoded when SQLAlchemy's codec is set on the connection, text if not.
    if isinstance(value, str):
        value = json.loads(value)
    return value or {}


def _check(result: object) -> None:
    if result is False:
        raise TransportFailed("transport returned False")


async def _failed_all(exc: BaseException, count: int) -> list[BaseException | bool | None]:
    return [exc] * count
