"""Moving a box between the worker and Debezium under load, without losing an item and
without a later item of a key reaching Kafka before an earlier one.

To Debezium (`switch_to_debezium`), one transaction on the box's table, locked against
inserts (store/capture.lock_items): every PENDING item is copied to the capture table in id
order and marked DELIVERED, and the capture trigger is added, so every later item is
captured as it is inserted. Debezium sends the copies first, then the new items, in commit
order. An item a worker was sending at that moment may reach Kafka twice, never after a
later item of its key (Debezium sends its copy in order anyway). Refused while the slot does
not exist (captures before it would never be read), while the box, a bucket or a key of it
is paused (Debezium would send the paused items at once), and for a strict box that has
items failed for good or in backoff (Debezium would send the later items of their keys).

To the worker (`switch_to_worker`): the box is paused for the workers (and the pause given
time to reach them); one locked transaction drops the trigger; the WAL position after it is
read and a heartbeat written after it; once the slot's confirmed position passes it, Kafka
has acknowledged every captured item, and the pause is lifted: the worker sends the items
created since, in id order. If Debezium does not get there in time the box stays paused
and the error says so (nothing is lost: the items wait PENDING); running the switch again
waits again and lifts that pause once Debezium is through.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.config.registry import Box
from outbox_engine.debezium.connector import DebeziumNames, debezium_topic
from outbox_engine.store import capture, slots
from outbox_engine.store.pauses import add_pause, list_pauses, remove_pause

SWITCH_PAUSE_REASON = "switching from Debezium to the worker"
# Workers re-read the pauses every 2 s (store/pauses.PauseReader); wait past that.
PAUSE_SETTLE_S = 5.0


class SwitchRefused(RuntimeError):
    """The switch would lose items or break per-key order; nothing was changed."""


@dataclass(frozen=True)
class SwitchReport:
    box: str
    to: Literal["debezium", "worker"]
    copied: int = 0  # pending items handed to Debezium
    failed_left: int = 0  # items failed for good that stay with the worker's tools
    lsn: str | None = None  # the WAL position Debezium had to confirm
    waited_s: float = 0.0
    was_captured: bool = False  # the trigger was already there (to debezium) / there (to worker)


async def switch_to_debezium(engine: AsyncEngine, box: Box, names: DebeziumNames) -> SwitchReport:
    topic = debezium_topic(box)
    async with engine.connect() as conn:
        state = await slots.slot_state(conn, names.slot)
    if not state.exists:
        raise SwitchRefused(
            f"replication slot {names.slot} does not exist: register the connector first "
            "(debezium-config --register), then switch"
        )
    pauses = await list_pauses(engine, box.name)
    if pauses:
        raise SwitchRefused(
            f"{', '.join(p.target for p in pauses)} paused: Debezium does not honour pauses and "
            "would send the paused items at once. Resume first (resume), then switch"
        )
    async with engine.begin() as conn:
        await capture.lock_items(conn, box.table_name)
        failed, backoff = await capture.holding_rows(conn, box.table_name)
        if box.config.strict_order and (failed or backoff):
            raise SwitchRefused(
                f"box {box.name} is strict and has {failed} item(s) failed for good and "
                f"{backoff} in backoff: they hold back later items of their keys, which "
                "Debezium would send. Retry, discard or park them first"
            )
        was = await capture.capture_installed(conn, box.table_name) is not None
        copied = await capture.capture_pending(conn, box.table_name, box.name, topic)
        await capture.install_capture(conn, box.table_name, box.name, topic)
    return SwitchReport(box.name, "debezium", copied=copied, failed_left=failed, was_captured=was)


async def _left_paused_by_a_switch(engine: AsyncEngine, box: str) -> bool:
    """An earlier switch to the worker timed out and left this box's pause behind."""
    return any(
        pause.bucket is None and pause.event_key is None and pause.reason == SWITCH_PAUSE_REASON
        for pause in await list_pauses(engine, box)
    )


async def switch_to_worker(
    engine: AsyncEngine, box: Box, names: DebeziumNames, timeout_s: float = 300.0
) -> SwitchReport:
    paused = await add_pause(engine, box.name, reason=SWITCH_PAUSE_REASON)
    if paused:
        await asyncio.sleep(PAUSE_SETTLE_S)
    # Run again after a timeout, the trigger is gone already but the wait is still owed:
    # waiting for a later position than the first run's is as safe.
    resumed_switch = not paused and await _left_paused_by_a_switch(engine, box.name)
    async with engine.begin() as conn:
        await capture.lock_items(conn, box.table_name)
        was = await capture.capture_installed(conn, box.table_name) is not None
        await capture.drop_capture(conn, box.table_name)
    async with engine.begin() as conn:
        lsn = await capture.current_lsn(conn)
        await capture.beat(conn, names.heartbeat_topic)
    started = time.monotonic()
    async with engine.connect() as conn:
        state = await slots.slot_state(conn, names.slot)
    if (was or resumed_switch) and state.exists:
        try:
            await slots.wait_confirmed(engine, names.slot, lsn, names.heartbeat_topic, timeout_s)
        except TimeoutError as exc:
            raise SwitchRefused(
                f"{exc}: Debezium has not yet sent everything captured before the switch. "
                f"Box {box.name} stays paused (its new items wait, nothing is lost); run the "
                "switch again to wait more (it resumes the box once the slot's "
                f"confirmed_flush_lsn has passed {lsn}; debezium-status shows it)"
            ) from None
    elif was or resumed_switch:
        raise SwitchRefused(
            f"replication slot {names.slot} does not exist, so what box {box.name} captured "
            "since it was dropped never reached Kafka. The box stays paused; replay its "
            "items of that period to the worker (replay), then resume it"
        )
    waited = time.monotonic() - started
    if paused or resumed_switch:
        await remove_pause(engine, box.name)
    return SwitchReport(box.name, "worker", lsn=lsn, waited_s=waited, was_captured=was)
