"""The worker process: owns buckets, runs the relay for every selected box, purges.

Per box it runs `concurrency` lanes; lane i processes the owned buckets b with
b % concurrency == i, one batch at a time, so each bucket is in one lane and one process.
Lanes wake on NOTIFY (milliseconds after a commit) and poll every `poll_interval` as a
safety net. SIGTERM/SIGINT let each lane finish its current batch within the shutdown
deadline; what is cut off stays pending and is sent again by the next owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Iterable

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, OperationalError

from .builtin_transports import KafkaTransport
from .middleware import Middlewares
from .ownership import BoxOwnership, Ownership
from .pauses import PauseReader
from .processor import BoxProcessor
from .registry import Box, BoxRegistry
from .resources import Resources
from .retention import purge
from .status import ItemStatus

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
            asyncio.create_task(self._rebalance_loop(), name="rebalance"),
            asyncio.create_task(self._depth_loop(), name="depth"),
            *(
                asyncio.create_task(self._retention_loop(box), name=f"retention:{box.name}")
                for box in self.boxes
            ),
        ]
        log.info(
            "worker started: boxes %s, concurrency %d",
            ", ".join(b.name for b in self.boxes),
            self.concurrency,
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
            log.info("worker stopped")

    async def _rebalance_loop(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                if not self.ownership.connected:
                    self.ownership.drop_all()
                    await self.ownership.connect()
                    log.info("worker joined: lock connection up")
                self._rebalance_now.clear()
                await self.ownership.rebalance()
                self.ready.set()
                failures = 0
            except Exception as exc:
                # The lock connection is gone or unusable: so are our locks. Stop at once.
                failures += 1
                self.ready.clear()
                self.ownership.drop_all()
                await self.ownership.close()
                log.error("lock connection failed (%s); retrying", exc)
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
                log.error(
                    "box %s lane %d: database error (%s: %s); retrying",
                    box.name,
                    lane,
                    type(exc).__name__,
                    exc,
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
                log.warning(
                    "box %s: destination unavailable for %d items; backing off %.1fs (no retry consumed)",
                    box.name,
                    report.unavailable,
                    delay,
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
        if not self.ready.is_set():
            return False, "not connected to PostgreSQL (lock connection)"
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
                    log.warning("box %s: cannot sample depth (%s)", box.name, exc)
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
