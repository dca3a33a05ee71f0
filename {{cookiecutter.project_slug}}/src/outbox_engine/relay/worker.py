"""The worker process: owns buckets, runs the relay for every selected box, purges.

Per box it runs `concurrency` lanes (relay/lanes.py) over the buckets this process owns
(store/ownership.py: advisory locks on one lock connection, rebalanced every
`rebalance_interval` and at once when another worker joins, leaves or gives buckets back).
Lanes wake on NOTIFY (milliseconds after a commit) and, as a safety net, when the idle
probe (relay/idle_probe.py: one statement for all idle lanes every `poll_interval`) finds
work. Next to the lanes run the Kafka check (relay/readiness.py), backlog sampling for the
depth gauges, and each box's retention. SIGTERM/SIGINT let each lane finish its current
batch within the shutdown deadline; what is cut off stays pending and is sent again by the
next owner.

Start and outages are reported as they are: the worker logs what it waits for (PostgreSQL
for its lock connection, Kafka when a box relays to it), "worker ready" only once both
answer, and keeps retrying; `readiness()` (the `/readyz` probe) names what is missing. A
repeated failure is logged once, then summarised per window (see kafka_logs.py).

Build one from a `WorkerOptions` (relay/options.py), usually through `WorkerApp`
(relay/app.py), which adds the probes and the signals of a process.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket

from outbox_engine.config.registry import Box, BoxRegistry
from outbox_engine.middleware import Middlewares
from outbox_engine.relay.capture_upkeep import CaptureUpkeep, split_by_relay
from outbox_engine.relay.depth_gauges import DepthGauges
from outbox_engine.relay.idle_probe import IdleProbe
from outbox_engine.relay.lane_group import LaneGroup
from outbox_engine.relay.lanes import Lanes, lanes_to_wake
from outbox_engine.relay.options import WorkerOptions
from outbox_engine.relay.pacing import DB_ERRORS, Flag, Pacer
from outbox_engine.relay.processor import RELAY_SESSION_SETTINGS, BoxProcessor
from outbox_engine.relay.readiness import (
    WorkerHealth,
    kafka_timeout_warnings,
    kafka_transports,
)
from outbox_engine.store.ownership import Ownership
from outbox_engine.store.pauses import PauseReader
from outbox_engine.store.pgconn import DriverConnections
from outbox_engine.store.retention import purge
from outbox_engine.transports.kafka_logs import REPEATS
from outbox_engine.transports.resources import Resources

log = logging.getLogger(__name__)


class Worker:
    def __init__(
        self,
        registry: BoxRegistry,
        resources: Resources,
        dsn: str,
        options: WorkerOptions,
        middlewares: Middlewares | None = None,
    ) -> None:
        self.options = options
        self.registry = registry
        self.resources = resources
        self.boxes: list[Box] = registry.select(list(options.boxes) or None)
        if not self.boxes:
            raise ValueError("no boxes to process: configure at least one box")
        # Boxes Debezium relays get no lanes, claims or bucket locks (capture_upkeep.py).
        self.relayed, self.debezium = split_by_relay(self.boxes)
        self.concurrency = concurrency = options.concurrency
        self.middlewares = middlewares or Middlewares()
        self._pacer = Pacer()
        # Per box: its lanes' wake-ups, and whether they claim apart (relay/lane_group.py).
        self.groups: dict[str, LaneGroup] = {
            box.channel: LaneGroup(concurrency, join=options.join_lanes) for box in self.relayed
        }
        name = f"{options.application_name}:{socket.gethostname()}:{os.getpid()}"[:63]
        # Set when another worker joins, leaves or gives buckets back: rebalance now.
        self._rebalance_now = Flag()
        self.ownership = Ownership(
            dsn, self.relayed, concurrency, name, self._on_wake, self._rebalance_now.set, self._lost
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
            for box in self.relayed
        }
        self.depth = DepthGauges(resources.engine, self.boxes, resources.observer)
        pauses = PauseReader(resources.engine)
        self.probe = IdleProbe(
            self._pacer,
            pauses,
            DriverConnections(resources.engine, keep=True, settings=RELAY_SESSION_SETTINGS),
        )
        self.upkeep = CaptureUpkeep(
            resources.engine,
            self.boxes,
            resources.observer,
            self._pacer,
            options.debezium_slot,
            options.capture_upkeep_interval,
        )
        self.health = WorkerHealth(
            self.relayed,
            concurrency,
            resources.producer,
            dsn,
            self._owned,
            options.kafka_check_interval,
        )
        self.lanes = Lanes(self._pacer, pauses, self.probe)
        # Set while the lock connection is up (and Kafka was checked once): see readiness.py.
        self.ready = self.health.ready
        self.readiness = self.health.readiness
        self.liveness = self.lanes.liveness

    def _probe_tick(self) -> float:
        """The idle probe's tick: the shortest `poll_interval` of the boxes with lanes."""
        return min(box.config.poll_interval for box in self.relayed)

    def _owned(self) -> int:
        return sum(len(s.owned) for s in self.ownership.boxes.values())

    def _on_wake(self, channel: str, payload: str = "") -> None:
        """A NOTIFY arrived. Its payload names the buckets that got items (see create.py):
        only the lanes of those buckets wake (lane 0 while the box's lanes are joined); an
        empty or unreadable payload wakes all."""
        group = self.groups.get(channel)
        if group is not None:
            group.wake(lanes_to_wake(payload, self.concurrency))

    def _lost(self) -> None:
        """The lock connection dropped (its buckets are already forgotten): not ready until
        it is back, and reconnect now rather than at the next tick."""
        self.ready.clear()
        self._rebalance_now.set()

    def stop(self) -> None:
        self._pacer.stop()

    async def run(self) -> None:
        transports = {
            id(t): t for box in self.relayed for t in (b.transport for b in box.transports)
        }
        for transport in transports.values():
            await transport.setup(self.resources)
        for warning in kafka_timeout_warnings(self.boxes, self.resources.producer.config):
            log.warning("%s", warning)
        lanes = [
            asyncio.create_task(
                self.lanes.run(
                    state,
                    lane,
                    self.processors[state.box.name],
                    self.groups[state.box.channel],
                    self.health.recovered if kafka_transports(state.box) else None,
                ),
                name=f"lane:{state.box.name}:{lane}",
            )
            for state in self.ownership.boxes.values()
            for lane in range(self.concurrency)
        ]
        background = [
            asyncio.create_task(self.health.kafka_loop(self._pacer), name="kafka-check"),
            asyncio.create_task(self._rebalance_loop(), name="rebalance"),
            asyncio.create_task(
                self.depth.run(self._pacer, self.options.depth_interval), name="depth"
            ),
            *(
                [asyncio.create_task(self.probe.run(self._probe_tick()), name="idle-probe")]
                if lanes
                else []
            ),
            asyncio.create_task(self.upkeep.run(), name="capture-upkeep"),
            *(
                asyncio.create_task(self._retention_loop(box), name=f"retention:{box.name}")
                for box in self.boxes
            ),
        ]
        log.info(
            "worker starting: boxes %s, concurrency %d%s; waiting for %s%s",
            ", ".join(b.name for b in self.boxes),
            self.concurrency,
            " (lanes joined while there is no backlog)"
            if self.options.join_lanes and self.concurrency > 1
            else "",
            self.health.waits_for(),
            f"; relayed by Debezium (not claimed here): {', '.join(b.name for b in self.debezium)}"
            if self.debezium
            else "",
        )
        try:
            await self._pacer.stopping.wait()
        finally:
            self._pacer.stop()
            for group in self.groups.values():
                group.wake_all()
            # No lanes when every selected box is relayed by Debezium.
            _done, pending = (
                await asyncio.wait(lanes, timeout=self.options.shutdown_timeout)
                if lanes
                else (set(), set())
            )
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
            for box in self.relayed:
                group = self.groups[box.channel]
                if group.adaptive:
                    # How the lanes of --join-lanes spent the run (lane_group.py).
                    log.info(
                        "box %s: lanes split %d times and joined again %d times",
                        box.name,
                        group.splits,
                        group.joins,
                    )
            await self.ownership.close()
            await self.probe.connections.close()
            for processor in self.processors.values():
                await processor.close()
            for transport in transports.values():
                await transport.close()
            REPEATS.flush()
            log.info("worker stopped")

    async def _rebalance_loop(self) -> None:
        health = self.health
        failures = 0
        while not self._pacer.stopped:
            try:
                if not self.ownership.connected:
                    self.ownership.drop_all()
                    await self.ownership.connect()
                    log.info(
                        "worker joined: lock connection up (PostgreSQL at %s)", health.database
                    )
                self._rebalance_now.clear()
                await self.ownership.rebalance()
                if not self.ready.is_set():
                    # `ready` means both were checked: wait for Kafka's first answer (<= 3 s).
                    await health.kafka_checked.wait()
                self.ready.set()
                health.db_problem = None
                failures = 0
                health.announce()
            except Exception as exc:
                # The lock connection is gone or unusable: so are our locks. Stop at once.
                failures += 1
                self.ready.clear()
                self.ownership.drop_all()
                await self.ownership.close()
                reason = f"{type(exc).__name__}: {exc}"
                health.db_problem = f"cannot reach PostgreSQL at {health.database} ({reason})"
                REPEATS.log(
                    log,
                    logging.ERROR,
                    f"lock connection failed: {health.db_problem}; retrying, not ready until "
                    "it answers",
                )
            delay = (
                self.options.rebalance_interval
                if not failures
                else min(2 ** min(failures, 5) * 0.25, 5.0)
            )
            await self._pacer.sleep(delay, None if failures else self._rebalance_now)

    async def _retention_loop(self, box: Box) -> None:
        while not self._pacer.stopped:
            await self._pacer.sleep(box.config.retention.interval_seconds)
            if self._pacer.stopped:
                return
            try:
                await purge(self.resources.engine, box, pause_seconds=0.05)
            except DB_ERRORS as exc:
                log.error("box %s: retention failed (%s); will try again", box.name, exc)
