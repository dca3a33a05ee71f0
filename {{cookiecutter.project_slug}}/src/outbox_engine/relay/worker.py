"""The worker process: owns buckets, runs the relay for every selected box, purges.

Per box it runs `concurrency` lanes; lane i processes the owned buckets b with
b % concurrency == i, one batch at a time, so each bucket is in one lane and one process.
Lanes wake on NOTIFY (milliseconds after a commit) and poll every `poll_interval` as a
safety net. SIGTERM/SIGINT let each lane finish its current batch within the shutdown
deadline; what is cut off stays pending and is sent again by the next owner.

Start and outages are reported as they are: the worker logs what it waits for (PostgreSQL
for its lock connection, Kafka when a box relays to it), "worker ready" only once both
answer, and keeps retrying; `readiness()` (the `/readyz` probe) names what is missing. A
repeated failure is logged once, then summarised per window (see kafka_logs.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, OperationalError

from outbox_engine.config.registry import Box, BoxRegistry
from outbox_engine.middleware import Middlewares
from outbox_engine.relay.processor import BoxProcessor
from outbox_engine.store.ownership import BoxOwnership, Ownership
from outbox_engine.store.pauses import PauseReader
from outbox_engine.store.retention import purge
from outbox_engine.store.status import ItemStatus
from outbox_engine.transports.base import TransportUnavailable
from outbox_engine.transports.builtin import KafkaTransport
from outbox_engine.transports.kafka_logs import REPEATS
from outbox_engine.transports.resources import Resources

log = logging.getLogger(__name__)

DEPTH_SQL = (
    "SELECT count(*), EXTRACT(EPOCH FROM now() - min(created_at)) FROM {table} "
    f"WHERE status = {int(ItemStatus.PENDING)}"
)
DEEPEST_SQL = (
    "SELECT count(*) FROM {table} "
    f"WHERE status = {int(ItemStatus.PENDING)} GROUP BY bucket ORDER BY 1 DESC LIMIT 1"
)
# What the database can raise at a lane: through SQLAlchemy, or from the asyncpg connection
# the relay's hot statements use directly (see pgconn.py).
DB_ERRORS = (
    DBAPIError,
    OperationalError,
    OSError,
    ConnectionError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
)


def kafka_timeout_warnings(boxes: Iterable[Box], producer_config: dict[str, object]) -> list[str]:
    """Boxes with a Kafka transport whose `transport_timeout_seconds` runs out before the
    producer's `message.timeout.ms`: a Kafka outage would cost them a retry (the relay's own
    timeout counts as a failed attempt; the producer's delivery timeout does not)."""
    try:
        producer_ms = float(str(producer_config.get("message.timeout.ms", 300_000)))
    except ValueError:
        return []
    warnings = []
    for box in boxes:
        if box.kind != "outbox" or not any(
            isinstance(b.transport, KafkaTransport) for b in box.transports
        ):
            continue
        if box.config.transport_timeout_seconds * 1000 <= producer_ms:
            warnings.append(
                f"box {box.name}: transport_timeout_seconds "
                f"{box.config.transport_timeout_seconds:g} is not longer than the Kafka "
                f"producer's message.timeout.ms {producer_ms:g}: a Kafka outage will count "
                "as failed attempts; make it longer (see docs/guarantees.md)"
            )
    return warnings


def describe_dsn(dsn: str) -> str:
    """Where a DSN points, without user or password: `host:port/database`."""
    try:
        parts = urlsplit(dsn)
        return f"{parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path or '/'}"
    except ValueError:
        return "the configured database"


def uses_kafka(boxes: Iterable[Box]) -> bool:
    """Whether any outbox box relays to Kafka (then Kafka is part of readiness)."""
    return any(
        isinstance(b.transport, KafkaTransport)
        for box in boxes
        if box.kind == "outbox"
        for b in box.transports
    )


def lanes_to_wake(payload: str, concurrency: int) -> set[int] | None:
    """The lanes of the buckets a NOTIFY payload names ("3,7,12"); None means every lane
    (no payload, or one this worker cannot read)."""
    if not payload:
        return None
    try:
        return {int(bucket) % concurrency for bucket in payload.split(",")}
    except ValueError:
        return None


class Worker:
    def __init__(
        self,
        registry: BoxRegistry,
        resources: Resources,
        dsn: str,
        *,
        box_names: Iterable[str] | None = None,
        concurrency: int = 1,
        middlewares: Middlewares | None = None,
        rebalance_interval: float = 1.0,
        shutdown_timeout: float = 30.0,
        application_name: str = "outbox-worker",
        depth_interval: float = 15.0,
        kafka_check_interval: float = 5.0,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.registry = registry
        self.resources = resources
        self.boxes: list[Box] = registry.select(list(box_names or []) or None)
        if not self.boxes:
            raise ValueError("no boxes to process: configure at least one box")
        self.concurrency = concurrency
        self.middlewares = middlewares or Middlewares()
        self.rebalance_interval = rebalance_interval
        self.shutdown_timeout = shutdown_timeout
        self._stopping = asyncio.Event()
        self._wake: dict[str, list[asyncio.Event]] = {
            box.channel: [asyncio.Event() for _ in range(concurrency)] for box in self.boxes
        }
        name = f"{application_name}:{socket.gethostname()}:{os.getpid()}"[:63]
        # Set when another worker joins, leaves or gives buckets back: rebalance now.
        self._rebalance_now = asyncio.Event()
        self.ownership = Ownership(
            dsn, self.boxes, concurrency, name, self._on_wake, self._rebalance_now.set, self._lost
        )
        self.processors = {
            box.name: BoxProcessor(
                box,
                resources.engine,
                resources.session_factory,
                self.middlewares,
                resources.observer,
                keep_connections=True,
            )
            for box in self.boxes
        }
        self.pauses = PauseReader(resources.engine)
        self.ready = asyncio.Event()
        self.depth_interval = depth_interval
        self._ticks: dict[str, float] = {}
        self.database = describe_dsn(dsn)
        # What keeps the worker from being ready (None: fine). Kafka counts only when a box
        # relays to it; its first check ends before `ready` is first set.
        self.db_problem: str | None = "not connected yet"
        self.uses_kafka = uses_kafka(self.boxes)
        self.kafka_problem: str | None = "not checked yet" if self.uses_kafka else None
        self.kafka_check_interval = kafka_check_interval
        self._kafka_checked = asyncio.Event()
        if not self.uses_kafka:
            self._kafka_checked.set()
        self._said_ready = False

    def _on_wake(self, channel: str, payload: str = "") -> None:
        """A NOTIFY arrived. Its payload names the buckets that got items (see create.py):
        only the lanes of those buckets wake; an empty or unreadable payload wakes all."""
        events = self._wake.get(channel, ())
        lanes = lanes_to_wake(payload, self.concurrency)
        for lane, event in enumerate(events):
            if lanes is None or lane in lanes:
                event.set()

    def _lost(self) -> None:
        """The lock connection dropped (its buckets are already forgotten): not ready until
        it is back, and reconnect now rather than at the next tick."""
        self.ready.clear()
        self._rebalance_now.set()

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        transports = {id(t): t for box in self.boxes for t in (b.transport for b in box.transports)}
        for transport in transports.values():
            await transport.setup(self.resources)
        for warning in kafka_timeout_warnings(self.boxes, self.resources.producer.config):
            log.warning("%s", warning)
        lanes = [
            asyncio.create_task(self._lane(state, lane), name=f"lane:{state.box.name}:{lane}")
            for state in self.ownership.boxes.values()
            for lane in range(self.concurrency)
        ]
        background = [
            asyncio.create_task(self._kafka_loop(), name="kafka-check"),
            asyncio.create_task(self._rebalance_loop(), name="rebalance"),
            asyncio.create_task(self._depth_loop(), name="depth"),
            *(
                asyncio.create_task(self._retention_loop(box), name=f"retention:{box.name}")
                for box in self.boxes
            ),
        ]
        waits = f"PostgreSQL at {self.database}"
        if self.uses_kafka:
            servers = self.resources.producer.config.get("bootstrap.servers", "?")
            waits += f" and Kafka at {servers}"
        log.info(
            "worker starting: boxes %s, concurrency %d; waiting for %s",
            ", ".join(b.name for b in self.boxes),
            self.concurrency,
            waits,
        )
        try:
            await self._stopping.wait()
        finally:
            self._stopping.set()
            for events in self._wake.values():
                for event in events:
                    event.set()
            _done, pending = await asyncio.wait(lanes, timeout=self.shutdown_timeout)
            for task in pending:
                task.cancel()
            for task in background:
                task.cancel()
            await asyncio.gather(*lanes, *background, return_exceptions=True)
            if pending:
                log.warning(
                    "shutdown deadline passed: %d lanes cut off; their items stay pending",
                    len(pending),
                )
            await self.ownership.close()
            for processor in self.processors.values():
                await processor.close()
            for transport in transports.values():
                await transport.close()
            REPEATS.flush()
            log.info("worker stopped")

    async def _kafka_loop(self) -> None:
        """Ask Kafka for metadata now and then: readiness says whether it answers."""
        if not self.uses_kafka:
            return
        producer = self.resources.producer
        while not self._stopping.is_set():
            try:
                producer.start()
                await producer.check(wait_seconds=3.0)
                if self.kafka_problem is not None and self._kafka_checked.is_set():
                    log.info("Kafka reachable again")
                self.kafka_problem = None
            except TransportUnavailable as exc:
                if self.kafka_problem is None or not self._kafka_checked.is_set():
                    log.error(
                        "cannot reach Kafka (%s); items stay pending, no retry consumed; "
                        "not ready until it answers",
                        exc,
                    )
                self.kafka_problem = f"cannot reach Kafka ({exc})"
            self._kafka_checked.set()
            self._announce()
            await self._sleep(self.kafka_check_interval)

    def _announce(self) -> None:
        """Log "worker ready" the first time PostgreSQL and Kafka both answer."""
        if self._said_ready or not self.ready.is_set() or self.kafka_problem is not None:
            return
        self._said_ready = True
        owned = sum(len(s.owned) for s in self.ownership.boxes.values())
        log.info(
            "worker ready: boxes %s, concurrency %d, %d buckets owned",
            ", ".join(b.name for b in self.boxes),
            self.concurrency,
            owned,
        )

    async def _rebalance_loop(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                if not self.ownership.connected:
                    self.ownership.drop_all()
                    await self.ownership.connect()
                    log.info("worker joined: lock connection up (PostgreSQL at %s)", self.database)
                self._rebalance_now.clear()
                await self.ownership.rebalance()
                if not self.ready.is_set():
                    # `ready` means both were checked: wait for Kafka's first answer (<= 3 s).
                    await self._kafka_checked.wait()
                self.ready.set()
                self.db_problem = None
                failures = 0
                self._announce()
            except Exception as exc:
                # The lock connection is gone or unusable: so are our locks. Stop at once.
                failures += 1
                self.ready.clear()
                self.ownership.drop_all()
                await self.ownership.close()
                reason = f"{type(exc).__name__}: {exc}"
                self.db_problem = f"cannot reach PostgreSQL at {self.database} ({reason})"
                REPEATS.log(
                    log,
                    logging.ERROR,
                    f"lock connection failed: {self.db_problem}; retrying, not ready until "
                    "it answers",
                )
            delay = (
                self.rebalance_interval if not failures else min(2 ** min(failures, 5) * 0.25, 5.0)
            )
            await self._sleep(delay, None if failures else self._rebalance_now)

    async def _lane(self, state: BoxOwnership, lane: int) -> None:
        box = state.box
        processor = self.processors[box.name]
        wake = self._wake[box.channel][lane]
        outage = 0
        errors = 0
        tick_key = f"{box.name}:{lane}"
        loop = asyncio.get_running_loop()
        while not self._stopping.is_set():
            self._ticks[tick_key] = loop.time()
            wake.clear()
            report = None
            try:
                async with state.lane_locks[lane]:
                    paused = await self.pauses.current()
                    buckets = [
                        b
                        for b in state.lane_buckets(lane)
                        if b not in paused.paused_buckets(box.name)
                    ]
                    if buckets and not paused.box_paused(box.name):
                        report = await processor.run_once(
                            buckets, paused.paused_keys(box.name), owns=state.owned.__contains__
                        )
                errors = 0
            except DB_ERRORS as exc:
                errors += 1
                REPEATS.log(
                    log,
                    logging.ERROR,
                    f"box {box.name} lane {lane}: database error ({type(exc).__name__}: {exc}); "
                    "retrying",
                )
                await self._sleep(min(0.2 * 2**errors, 5.0))
                continue
            except Exception:
                # Whatever else a batch raised (a connection left in a bad state by a
                # database restart, a bug): a lane must never end while the worker holds its
                # buckets, or their items would wait for a restart. Its items stay pending.
                errors += 1
                log.exception("box %s lane %d: unexpected error; retrying", box.name, lane)
                await self._sleep(min(0.2 * 2**errors, 5.0))
                continue
            if report is not None and report.unavailable:
                outage += 1
                delay = min(0.5 * 2 ** min(outage - 1, 6), 30.0)
                REPEATS.log(
                    log,
                    logging.WARNING,
                    f"box {box.name}: destination unavailable for {report.unavailable} items; "
                    f"backing off {delay:.1f}s (no retry consumed)",
                    key=f"unavailable:{box.name}",
                )
                await self._sleep(delay)
                continue
            outage = 0
            if report is not None and report.claimed:
                continue  # there may be more right away
            await self._sleep(box.config.poll_interval, wake)

    def liveness(self, stall_seconds: float = 120.0) -> tuple[bool, str]:
        """Alive while every lane has turned within `stall_seconds` (a stuck lane fails it)."""
        now = asyncio.get_running_loop().time()
        stalled = [k for k, t in self._ticks.items() if now - t > stall_seconds]
        if stalled:
            return False, f"lanes stalled: {', '.join(sorted(stalled))}"
        return True, f"ok: {len(self._ticks)} lanes"

    def readiness(self) -> tuple[bool, str]:
        """Ready when the lock connection is up and, if a box relays to Kafka, Kafka answers;
        otherwise "not ready: " and each reason."""
        reasons = []
        if not self.ready.is_set():
            reasons.append(
                f"not connected to PostgreSQL (lock connection): {self.db_problem or 'connecting'}"
            )
        if self.kafka_problem is not None:
            reasons.append(self.kafka_problem)
        if reasons:
            return False, "not ready: " + "; ".join(reasons)
        owned = sum(len(s.owned) for s in self.ownership.boxes.values())
        return True, f"ok: {owned} buckets owned"

    async def _depth_loop(self) -> None:
        """Sample each box's backlog for the depth gauges."""
        while not self._stopping.is_set():
            for box in self.boxes:
                try:
                    async with self.resources.engine.connect() as conn:
                        row = (
                            await conn.execute(text(DEPTH_SQL.format(table=box.table_name)))
                        ).one()
                        deepest = (
                            await conn.execute(text(DEEPEST_SQL.format(table=box.table_name)))
                        ).scalar()
                    self.resources.observer.depth(
                        box, int(row[0]), float(row[1] or 0.0), int(deepest or 0)
                    )
                except DB_ERRORS as exc:
                    REPEATS.log(
                        log, logging.WARNING, f"box {box.name}: cannot sample depth ({exc})"
                    )
            await self._sleep(self.depth_interval)

    async def _retention_loop(self, box: Box) -> None:
        while not self._stopping.is_set():
            await self._sleep(box.config.retention.interval_seconds)
            if self._stopping.is_set():
                return
            try:
                await purge(self.resources.engine, box, pause_seconds=0.05)
            except DB_ERRORS as exc:
                log.error("box %s: retention failed (%s); will try again", box.name, exc)

    async def _sleep(self, seconds: float, wake: asyncio.Event | None = None) -> None:
        waiters = [asyncio.ensure_future(self._stopping.wait())]
        if wake is not None:
            waiters.append(asyncio.ensure_future(wake.wait()))
        try:
            await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiter
