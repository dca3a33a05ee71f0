"""A box relayed by Debezium keeps the relay's promises, counted on real PostgreSQL (logical
decoding), Kafka and Kafka Connect: 3,000 items over 50 keys, created through the service's
own `create()` path in concurrent transactions after the box was switched to Debezium, are
all on the topic (lost 0, nothing that was never committed), each key's first deliveries in
creation order, duplicates counted (at-least-once allows them); every item row is marked
delivered by the capture trigger (nothing left for a worker) and has exactly one capture row.
"""

from __future__ import annotations

import time

import pytest

from ..guarantees.load import Load
from ..guarantees.report import Row
from .conftest import ServiceFactory
from .flow import audited, drain, failures, load

pytestmark = pytest.mark.connect

PLAN = Load(keys=50, per_key=60, writers=10, seconds=3.0)


async def test_every_committed_item_reaches_the_topic_in_per_key_order(
    dbz: ServiceFactory, ledger: list[Row]
) -> None:
    started = time.monotonic()
    async with dbz("audit") as service:
        await service.register()
        switched = await service.to_debezium()
        assert switched.copied == 0  # nothing was pending before the switch
        await load(service, PLAN)
        drained = await drain(service)
        row = await audited(service, "audit", started)
        row.notes.append(f"drained {drained:.1f}s after the last commit")
        ledger.append(row)
        pending, captured = await service.pending(), await service.captured()
    assert (pending, captured) == (0, PLAN.items)
    found = failures(row, PLAN.items)
    row.passed = not found
    assert not found, f"{'; '.join(found)}\n{row}"
    assert row.created == row.delivered == PLAN.items
