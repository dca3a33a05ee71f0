"""The idle probe: one statement a tick tells every idle lane whether it has work.

A lane whose claim took everything claimable waits for a NOTIFY (relay/lanes.py). Something
must still look for what no NOTIFY announces: an item whose backoff ended, a key whose
blocking head was retried by an operator, a NOTIFY lost while the listen connection was
down. Each idle lane used to claim again every `poll_interval` for that: one statement per
lane and second, 20 a second for a worker with 10 boxes of 2 lanes and nothing to do. The
probe asks the same question for all idle lanes in one statement: per lane, an EXISTS with
the claim's own conditions (store/items.py `due_check`, one index range scan per bucket
stopping at the first claimable row), and wakes the lanes that have a claimable item, which
then claim as before. A lane is probed every `poll_interval` of its box, so an item waits
after its backoff what it waited before.

Paused boxes and buckets are left out and paused keys passed on (the same `PauseReader` the
lanes read). When the probe fails, every idle lane is woken and claims on its own (with its
own error backoff, as before the probe existed); a lane also claims on its own after
`fallback_seconds` without a wake, in case this loop were stuck.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from outbox_engine.relay.lane_group import LaneGroup
from outbox_engine.relay.pacing import Flag, Pacer
from outbox_engine.store.items import ItemReads, due_lanes
from outbox_engine.store.ownership import BoxOwnership
from outbox_engine.store.pauses import PauseReader
from outbox_engine.store.pgconn import DriverConnections
from outbox_engine.transports.kafka_logs import REPEATS

log = logging.getLogger("outbox_engine.relay.worker")

LaneKey = tuple[str, int]


@dataclass
class IdleLane:
    """A lane waiting for work: its box's ownership, its number, its box's reads, the
    event that wakes it and its box's lane group (which buckets it claims for now)."""

    state: BoxOwnership
    lane: int
    reads: ItemReads
    wake: Flag
    group: LaneGroup
    next_at: float = 0.0  # loop time of its next probe

    def buckets(self) -> list[int]:
        """The owned buckets this lane would claim now (relay/lane_group.py)."""
        lanes = self.group.claims_for(self.lane)
        return self.state.buckets_of(lanes) if lanes else []


class IdleProbe:
    def __init__(
        self,
        pacer: Pacer,
        pauses: PauseReader,
        connections: DriverConnections,
        fallback_seconds: float = 30.0,
    ) -> None:
        self.pacer = pacer
        self.pauses = pauses
        self.connections = connections
        self.fallback_seconds = fallback_seconds
        self._idle: dict[LaneKey, IdleLane] = {}
        self.statements = 0  # probes run since start
        self.woken = 0  # lanes they woke

    def fallback(self, poll_interval: float) -> float:
        """How long an idle lane waits for a wake before it claims on its own."""
        return max(poll_interval, self.fallback_seconds)

    def enter(self, lane: IdleLane) -> None:
        """`lane` waits for work from now on: first probed one `poll_interval` later."""
        config = lane.state.box.config
        lane.next_at = asyncio.get_running_loop().time() + config.poll_interval
        self._idle[(lane.state.box.name, lane.lane)] = lane

    def leave(self, state: BoxOwnership, lane: int) -> None:
        self._idle.pop((state.box.name, lane), None)

    def idle_lanes(self, box: str) -> list[int]:
        """The lanes of `box` waiting for work now."""
        return sorted(lane for name, lane in self._idle if name == box)

    async def run(self, tick: float) -> None:
        """Probe every `tick` seconds (the shortest `poll_interval`) until the worker stops."""
        while not self.pacer.stopped:
            await self.pacer.sleep(tick)
            if self.pacer.stopped:
                return
            await self.probe_once(tolerance=tick / 2)

    async def probe_once(self, tolerance: float = 0.0) -> int:
        """Probe the idle lanes that are due (within `tolerance` seconds); wake those with
        work. Returns how many lanes were woken."""
        now = asyncio.get_running_loop().time()
        due = [lane for lane in self._idle.values() if lane.next_at <= now + tolerance]
        if not due:
            return 0
        paused = await self.pauses.current()
        checks: list[tuple[ItemReads, list[int], list[str]]] = []
        probed: list[IdleLane] = []
        for lane in due:
            lane.next_at = now + lane.state.box.config.poll_interval
            box = lane.state.box.name
            if paused.box_paused(box):
                continue
            skip = paused.paused_buckets(box)
            buckets = [b for b in lane.buckets() if b not in skip]
            if buckets:
                checks.append((lane.reads, buckets, sorted(paused.paused_keys(box))))
                probed.append(lane)
        if not checks:
            return 0
        try:
            async with self.connections.acquire() as conn:
                found = await due_lanes(conn, checks)
        except Exception as exc:
            # Whatever failed, the lanes must not wait on it: each claims on its own.
            REPEATS.log(
                log,
                logging.WARNING,
                f"idle probe failed ({type(exc).__name__}: {exc}); every idle lane claims "
                "for itself",
                key="idle-probe",
            )
            found = set(range(len(probed)))
        self.statements += 1
        for index in found:
            probed[index].wake.set()
        self.woken += len(found)
        return len(found)
