"""The worker's depth gauges: each box's backlog (pending items, the oldest one's age, the
deepest bucket; store/depth.py) sampled every `depth_interval` and handed to the observer.

Every box is sampled on one connection a round, with the relay's session settings (they
cost two statements a checkout, one to set them and one to reset them, so once a round
rather than once a box). A statement the database refuses for one box (its table missing,
say) is logged and the other boxes are still sampled; a lost connection ends the round, and
the next round takes a new one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.config.registry import Box
from outbox_engine.observability.observer import Observer
from outbox_engine.relay.pacing import DB_ERRORS, Pacer
from outbox_engine.relay.processor import RELAY_SESSION_SETTINGS
from outbox_engine.store.depth import sample_depth
from outbox_engine.store.pgconn import DriverConnections
from outbox_engine.transports.kafka_logs import REPEATS

# The worker's lines keep the logger they always had (log filters and dashboards use it).
log = logging.getLogger("outbox_engine.relay.worker")


class DepthGauges:
    """The boxes' depths, to `observer`, read through `engine`'s pool."""

    def __init__(self, engine: AsyncEngine, boxes: Sequence[Box], observer: Observer) -> None:
        self.boxes = boxes
        self.observer = observer
        self._connections = DriverConnections(engine, settings=RELAY_SESSION_SETTINGS)

    async def sample(self) -> None:
        """One round: every box's depth to the observer."""
        try:
            async with self._connections.acquire() as conn:
                for box in self.boxes:
                    try:
                        depth = await sample_depth(conn, box.table_name)
                    except asyncpg.PostgresError as exc:
                        REPEATS.log(
                            log, logging.WARNING, f"box {box.name}: cannot sample depth ({exc})"
                        )
                        continue
                    self.observer.depth(
                        box, depth.pending, depth.oldest_seconds, depth.deepest_bucket
                    )
        except DB_ERRORS as exc:
            REPEATS.log(log, logging.WARNING, f"cannot sample the boxes' depth ({exc})")

    async def run(self, pacer: Pacer, interval: float) -> None:
        """A round every `interval` seconds until `pacer` stops."""
        while not pacer.stopped:
            await self.sample()
            await pacer.sleep(interval)
