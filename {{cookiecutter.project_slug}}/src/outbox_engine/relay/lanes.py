"""The worker's lanes: one loop per box and lane, one batch at a time.

Lane i of a box processes the owned buckets b with b % concurrency == i, so each bucket is
in one lane of one process and its items go out in order. A lane wakes on a NOTIFY for its
buckets (milliseconds after a commit), right away when its last claim may have left items
behind (a full batch, a bucket at its share, items deferred: `BatchReport.more`), and when
the idle probe (relay/idle_probe.py, one statement for all idle lanes every
`poll_interval`) finds a claimable item no NOTIFY announced. A lane never ends while the
worker runs: a database error or any other exception is logged and retried with a growing
pause (its items stay pending), and a destination that is unavailable backs the lane off
without consuming a retry: 0.5 s doubling to 30 s, cut short when the worker's Kafka check
finds Kafka answering again or replaces the producer's client (`recovered`, for the boxes
that relay to Kafka), and then started over, so delivery resumes within a check (and the
broker's own start) of its return, not up to 30 s later. Each turn stamps a tick;
`liveness()` fails when a lane stops turning.

With the worker's `--join-lanes`, the lanes of a box claim apart only while there is a
backlog and lane 0 claims for all of them otherwise (relay/lane_group.py says when, why, and
why that is not the default).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

from outbox_engine.relay.idle_probe import IdleLane, IdleProbe
from outbox_engine.relay.lane_group import LaneGroup
from outbox_engine.relay.pacing import DB_ERRORS, Pacer, Pulse
from outbox_engine.relay.processor import BoxProcessor
from outbox_engine.store.ownership import BoxOwnership
from outbox_engine.store.pauses import PauseReader
from outbox_engine.transports.kafka_logs import REPEATS

# The worker's lines keep the logger they always had (log filters and dashboards use it).
log = logging.getLogger("outbox_engine.relay.worker")


def lanes_to_wake(payload: str, concurrency: int) -> set[int] | None:
    """The lanes of the buckets a NOTIFY payload names ("3,7,12"); None means every lane
    (no payload, or one this worker cannot read)."""
    if not payload:
        return None
    try:
        return {int(bucket) % concurrency for bucket in payload.split(",")}
    except ValueError:
        return None


def _holding(state: BoxOwnership, lanes: tuple[int, ...]) -> AbstractAsyncContextManager[Any]:
    """The locks of `lanes`, taken in lane order: the lane's own lock alone, as always,
    unless a joined lane 0 claims for several."""
    if len(lanes) == 1:
        return state.lane_locks[lanes[0]]
    return _all_held([state.lane_locks[lane] for lane in lanes])


@asynccontextmanager
async def _all_held(locks: list[asyncio.Lock]) -> AsyncIterator[None]:
    async with AsyncExitStack() as stack:
        for lock in locks:
            await stack.enter_async_context(lock)
        yield


class Lanes:
    """Runs the lanes of every box, and knows when each last turned."""

    def __init__(self, pacer: Pacer, pauses: PauseReader, probe: IdleProbe) -> None:
        self.pacer = pacer
        self.pauses = pauses
        self.probe = probe
        self._ticks: dict[str, float] = {}

    async def run(
        self,
        state: BoxOwnership,
        lane: int,
        processor: BoxProcessor,
        group: LaneGroup,
        recovered: Pulse | None = None,
    ) -> None:
        """Process lane `lane` of `state.box` until the worker stops: its own buckets while
        `group` is split, every lane's (lane 0) or none (the others) while it is joined.
        `recovered` fires when the box's destination may be back: it ends an outage
        back-off sleeping then."""
        box = state.box
        sleep = self.pacer.sleep
        wake = group.flags[lane]
        outage = 0
        errors = 0
        tick_key = f"{box.name}:{lane}"
        loop = asyncio.get_running_loop()
        while not self.pacer.stopped:
            self._ticks[tick_key] = loop.time()
            wake.clear()
            claims = group.claims_for(lane)
            if not claims:
                # Joined: lane 0 claims this lane's buckets. Whatever woke this lane (a
                # NOTIFY routed here just before the join) is lane 0's now.
                group.joined_turn()
                await sleep(self.probe.fallback(box.config.poll_interval), wake)
                continue
            report = None
            try:
                async with _holding(state, claims):
                    paused = await self.pauses.current()
                    skip = paused.paused_buckets(box.name)
                    buckets = [b for b in state.buckets_of(claims) if b not in skip]
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
                await sleep(min(0.2 * 2**errors, 5.0))
                continue
            except Exception:
                # Whatever else a batch raised (a connection left in a bad state by a
                # database restart, a bug): a lane must never end while the worker holds its
                # buckets, or their items would wait for a restart. Its items stay pending.
                errors += 1
                log.exception("box %s lane %d: unexpected error; retrying", box.name, lane)
                await sleep(min(0.2 * 2**errors, 5.0))
                continue
            if report is not None and report.unavailable:
                outage += 1
                delay = min(0.5 * 2 ** min(outage - 1, 6), 30.0)
                REPEATS.log(
                    log,
                    logging.WARNING,
                    f"box {box.name}: destination unavailable for {report.unavailable} items "
                    f"({report.unavailable_error}); backing off {delay:.1f}s (no retry consumed)",
                    key=f"unavailable:{box.name}",
                )
                back = recovered.event() if recovered is not None else None
                await sleep(delay, back)
                if back is not None and back.is_set():
                    # Kafka answers again: a failure now is the broker still starting (its
                    # metadata answered before it takes writes), or a new outage; either way
                    # the back-off starts over from 0.5 s rather than at 30 s.
                    outage = 0
                continue
            outage = 0
            more = report is not None and report.more
            group.after(lane, more)
            if more:
                continue  # there may be more right away
            # Otherwise the claim took everything claimable: a claim now would find what
            # committed since, whose NOTIFY has set `wake` already (cleared before the claim),
            # so the sleep below ends at once for it and costs nothing more. Not claiming
            # again blindly saves a statement and a round trip a batch under light load.
            self.probe.enter(IdleLane(state, lane, processor.claimer.reads, wake, group))
            try:
                await sleep(self.probe.fallback(box.config.poll_interval), wake)
            finally:
                self.probe.leave(state, lane)

    def liveness(self, stall_seconds: float = 120.0) -> tuple[bool, str]:
        """Alive while every lane has turned within `stall_seconds` (a stuck lane fails it)."""
        now = asyncio.get_running_loop().time()
        stalled = [k for k, t in self._ticks.items() if now - t > stall_seconds]
        if stalled:
            return False, f"lanes stalled: {', '.join(sorted(stalled))}"
        return True, f"ok: {len(self._ticks)} lanes"
