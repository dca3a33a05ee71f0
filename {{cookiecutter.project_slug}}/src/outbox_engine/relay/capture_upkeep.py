"""The worker's upkeep of the Debezium relay: what it does for boxes it does not relay.

A box with `relay: debezium` gets no lanes, claims or bucket locks in the worker (its items
are captured by a trigger and sent by Debezium, see store/capture.py); its depth gauge and
item retention still run. When the worker serves at least one such box, `CaptureUpkeep`
also:

- checks at start that configuration and database agree, and logs a warning for each box
  that disagrees: `relay: debezium` without the capture trigger (nothing relays its new
  items: they stay pending and the depth alert fires), or the trigger on a `relay: worker`
  box (the worker finds nothing pending in it: Debezium sends its items);
- deletes capture rows (heartbeats included) older than `CAPTURE_KEEP_SECONDS`, every
  `interval` seconds (the WAL, held by the replication slot, carries them to Debezium; the
  table rows are not needed once committed);
- reports the slot's lag in bytes to the observer (`slot_lag`), when it knows the slot.

The startup check runs whenever the worker serves an outbox box, Debezium or not, so a
forgotten `relay:` line after `debezium-switch` shows in the log of the next start.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.config.registry import Box
from outbox_engine.observability.observer import Observer
from outbox_engine.relay.pacing import DB_ERRORS, Pacer
from outbox_engine.store.capture import capture_installed, purge_captured
from outbox_engine.store.slots import slot_state
from outbox_engine.transports.kafka_logs import REPEATS

# The worker's lines keep the logger they always had (log filters and dashboards use it).
log = logging.getLogger("outbox_engine.relay.worker")

# Capture rows (heartbeats too) are kept this long after capture (store/capture.py).
CAPTURE_KEEP_SECONDS = 600.0


def split_by_relay(boxes: Sequence[Box]) -> tuple[list[Box], list[Box]]:
    """(boxes the worker relays or processes, outbox boxes Debezium relays)."""
    relayed = [b for b in boxes if not b.relayed_by_debezium]
    debezium = [b for b in boxes if b.relayed_by_debezium]
    return relayed, debezium


def disagreement(box: Box, trigger_topic: str | None) -> str | None:
    """The warning for a box whose configuration and capture trigger disagree, or None."""
    if box.relayed_by_debezium and trigger_topic is None:
        return (
            f"box {box.name}: relay: debezium in the boxes file, but its table has no capture "
            "trigger: nothing relays its new items (they stay pending); run "
            f"`debezium-switch {box.name} --to debezium`, or set relay: worker"
        )
    if not box.relayed_by_debezium and trigger_topic is not None:
        return (
            f"box {box.name}: its table has the capture trigger (Debezium relays its items), "
            "but the boxes file says relay: worker: this worker finds nothing pending in it; "
            f"set relay: debezium, or run `debezium-switch {box.name} --to worker`"
        )
    return None


async def check_relays(engine: AsyncEngine, boxes: Sequence[Box]) -> list[str]:
    """The warnings for every outbox box whose configuration and trigger disagree."""
    warnings = []
    async with engine.connect() as conn:
        for box in boxes:
            if box.kind != "outbox":
                continue
            warning = disagreement(box, await capture_installed(conn, box.table_name))
            if warning:
                warnings.append(warning)
        await conn.rollback()
    return warnings


class CaptureUpkeep:
    """The startup check, and the purge and slot-lag loop when a box is Debezium's."""

    def __init__(
        self,
        engine: AsyncEngine,
        boxes: Sequence[Box],
        observer: Observer,
        pacer: Pacer,
        slot: str | None = None,
        interval: float = 60.0,
    ) -> None:
        self.engine = engine
        self.boxes = list(boxes)
        self.debezium = [b for b in self.boxes if b.relayed_by_debezium]
        self.observer = observer
        self.pacer = pacer
        self.slot = slot
        self.interval = interval
        # Capture rows deleted by this worker so far (tests and logs read it).
        self.purged = 0

    async def run(self) -> None:
        """Warn about disagreements once, then (if a box is Debezium's) purge and sample."""
        await self._check()
        if not self.debezium:
            return
        while not self.pacer.stopped:
            await self.tick()
            await self.pacer.sleep(self.interval)

    async def _check(self) -> None:
        while not self.pacer.stopped:
            try:
                for warning in await check_relays(self.engine, self.boxes):
                    log.warning("%s", warning)
                return
            except DB_ERRORS as exc:  # PostgreSQL not up yet: the check waits for it
                REPEATS.log(log, logging.WARNING, f"cannot check the capture triggers ({exc})")
                await self.pacer.sleep(5.0)

    async def tick(self) -> None:
        """One purge of old capture rows, and one slot-lag sample."""
        try:
            deleted = await purge_captured(self.engine, CAPTURE_KEEP_SECONDS)
            self.purged += deleted
            if deleted:
                log.info(
                    "deleted %d captured rows older than %.0f s", deleted, CAPTURE_KEEP_SECONDS
                )
            if self.slot is not None:
                async with self.engine.connect() as conn:
                    state = await slot_state(conn, self.slot)
                    await conn.rollback()
                self.observer.slot_lag(self.slot, state.lag_bytes if state.exists else None)
        except DB_ERRORS as exc:
            REPEATS.log(log, logging.WARNING, f"capture upkeep failed ({exc}); will try again")
