"""What PostgreSQL says about each outbox box's Debezium relay, for `debezium-status`,
`stats` and the admin API: is the capture trigger there, does the slot exist and stream,
how much WAL it holds back, and which states are wrong.

A box configured for Debezium without its trigger has items nobody sends (they stay
PENDING); a trigger without a slot captures into WAL nobody keeps; an inactive slot holds
WAL on the primary until Connect is back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.config.registry import Box
from outbox_engine.debezium.connector import DebeziumNames
from outbox_engine.store import capture, slots
from outbox_engine.store.status import ItemStatus


@dataclass(frozen=True)
class BoxCaptureStatus:
    box: str
    relay: str  # what config/boxes.yaml says
    captured: bool  # the capture trigger is installed
    topic: str | None
    pending: int
    slot: slots.SlotState
    problems: list[str] = field(default_factory=list)


async def debezium_status(
    engine: AsyncEngine, boxes: list[Box], names: DebeziumNames
) -> list[BoxCaptureStatus]:
    result = []
    async with engine.connect() as conn:
        slot = await slots.slot_state(conn, names.slot)
        for box in boxes:
            if box.kind != "outbox":
                continue
            topic = await capture.capture_installed(conn, box.table_name)
            pending = int(
                (
                    await conn.execute(
                        text(
                            f"SELECT count(*) FROM {box.table_name} "
                            f"WHERE status = {int(ItemStatus.PENDING)}"
                        )
                    )
                ).scalar_one()
            )
            relay = "debezium" if box.relayed_by_debezium else "worker"
            problems = []
            if relay == "debezium" and topic is None:
                problems.append(
                    f"configured for Debezium but not captured: {pending} pending item(s) "
                    "nobody sends (debezium-switch --to debezium)"
                )
            if topic is not None:
                if not slot.exists:
                    problems.append(f"captured, but replication slot {names.slot} is missing")
                elif not slot.active:
                    problems.append(
                        f"captured, but slot {names.slot} is not streaming (Connect down?): "
                        f"{slot.lag_bytes or 0} bytes of WAL held"
                    )
                if slot.wal_status == "lost":
                    problems.append(
                        f"slot {names.slot} lost WAL it needed (max_slot_wal_keep_size)"
                    )
                if relay == "worker":
                    problems.append(
                        "captured by Debezium while configured `relay: worker`: set "
                        "`relay: debezium` (the worker finds nothing to send)"
                    )
            result.append(
                BoxCaptureStatus(box.name, relay, topic is not None, topic, pending, slot, problems)
            )
    return result
