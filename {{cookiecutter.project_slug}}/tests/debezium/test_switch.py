"""A box switched from its worker to Debezium and back, under load, loses nothing and keeps
each key's first deliveries in creation order across both switches.

The procedure the test follows is the one docs/debezium.md gives operators:

1. Register (`debezium-config --register`): the publication and the replication slot are
   created, then the connector; from now on every capture row is in WAL the slot keeps.
2. Worker -> Debezium (`debezium-switch BOX --to debezium`), while the worker still runs and
   items keep being created: one transaction locks the item table (in-flight inserts commit
   first, new ones wait), copies every pending item into the capture table in id order,
   marks them delivered and installs the capture trigger. An item the worker was sending at
   that moment is sent twice (at-least-once), never out of order.
3. Set `relay: debezium` in boxes.yaml and restart the workers (here: two in-process
   workers, each its own member splitting the box's buckets, are stopped and started with
   that configuration). Pending stays 0 from now on: every new item is captured by the
   trigger.
4. Debezium -> worker (`debezium-switch BOX --to worker`): the box is paused, one
   transaction locks the table and drops the trigger, a heartbeat is written and the switch
   waits until the slot confirmed it (everything captured before is on Kafka), then the box
   is resumed. Items created meanwhile wait, pending, for the worker.
5. Set `relay: worker` and restart the workers: they relay the waiting items in id order.

Load: 4,000 items over 50 keys from concurrent transactions over ~12 s (~330/s), through
`create()`; the switches land ~3 s and ~7 s in. Before the first switch the worker lags
behind (its Kafka transport waits 0.3 s before each item: a key gets ~3 items/s of its ~7), so the switch has
both pending items to copy and a batch in flight: the copy must be > 0, and the in-flight
items may arrive twice (counted). Audit as the guarantees suite's, plus: no
key on more than one partition (both relays must partition keys alike, or consumers lose
per-key order at the switch)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from outbox_engine.config.boxes import parse_boxes
from outbox_engine.config.registry import BoxRegistry

from ..guarantees.load import Load, Stats
from ..guarantees.report import Row
from ..guarantees.transports import ScriptedKafkaTransport
from ..support import OUTBOX_BOX, running_worker, transport, wait_for
from .conftest import ServiceFactory
from .flow import audited, failures, load
from .harness import DebeziumService

pytestmark = pytest.mark.connect

PLAN = Load(keys=50, per_key=80, writers=5, seconds=12.0)
WORKER_PHASE, DEBEZIUM_PHASE = 3.0, 4.0
WORKERS = 2  # worker processes of the service, as two in-process workers: two members


@contextlib.asynccontextmanager
async def workers(service: DebeziumService, registry: BoxRegistry) -> AsyncIterator[None]:
    """WORKERS workers of the box, each with its own lock connection (the buckets split)."""
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(WORKERS):
            await stack.enter_async_context(
                running_worker(service.container, registry, [OUTBOX_BOX])
            )
        yield


async def _sample_pending(service: DebeziumService, seconds: float) -> int:
    """The most items seen pending during `seconds` (the trigger leaves none)."""
    most = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        most = max(most, await service.pending())
        await asyncio.sleep(0.2)
    return most


def lagging(service: DebeziumService) -> BoxRegistry:
    """The worker's boxes with a Kafka transport that waits 0.3 s before each item."""
    raw = service.raw_boxes("worker")
    slow = transport(ScriptedKafkaTransport, topic=service.topic, slow_every=1, slow_seconds=0.3)
    raw["outbox"][OUTBOX_BOX]["transports"] = [slow]
    return BoxRegistry(parse_boxes(raw, "lagging worker boxes"))


async def test_worker_to_debezium_and_back_under_load(
    dbz: ServiceFactory, ledger: list[Row]
) -> None:
    started = time.monotonic()
    stats = Stats()
    async with dbz("switch") as service:
        await service.register()
        writing = asyncio.create_task(load(service, PLAN, stats))
        try:
            async with workers(service, lagging(service)):
                await asyncio.sleep(WORKER_PHASE)
                to_debezium = await service.to_debezium()
            async with workers(service, service.registry("debezium")):
                pending_under_debezium = await _sample_pending(service, DEBEZIUM_PHASE)
                to_worker = await service.to_worker()
            async with workers(service, service.registry("worker")):
                await writing

                async def drained() -> bool:
                    return await service.pending() == 0

                await wait_for(drained, within=60)
        finally:
            if not writing.done():
                writing.cancel()
            await asyncio.gather(writing, return_exceptions=True)
        row = await audited(service, "switch", started)
        row.notes.append(
            f"{WORKERS} workers; to debezium: {to_debezium}; to worker: {to_worker}; most pending while "
            f"Debezium relayed: {pending_under_debezium}"
        )
        ledger.append(row)
    found = failures(row, PLAN.items)
    if not to_debezium.copied:
        found.append(
            "the switch to Debezium found no pending item to copy (the load was too light)"
        )
    if pending_under_debezium:
        found.append(f"{pending_under_debezium} items pending while the trigger was installed")
    row.passed = not found
    assert not found, f"{'; '.join(found)}\n{row}"
