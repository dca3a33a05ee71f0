"""A Debezium box under load through a fault loses nothing and keeps per-key order: the Kafka
Connect worker SIGKILLed and started again, PostgreSQL stopped and started, Kafka stopped and
started. Each test: a fresh service switched to Debezium, 2,000 items over 50 keys created in
concurrent transactions for ~8 s (a write the fault rejects is retried, as a client would),
the fault 2 s in, then the drain (every committed item on the topic, or 180 s) and the
audit: lost 0, nothing never committed, first
deliveries per key in creation order; duplicates (Debezium re-sends what it had not yet
recorded as sent) are counted and reported, not failed.

Marked slow (they stop shared servers); they need TEST_CONNECT_KILL_CMD/START_CMD,
TEST_PG_STOP_CMD/START_CMD and TEST_KAFKA_STOP_CMD/START_CMD (faults.py)."""

from __future__ import annotations

import asyncio
import time

import pytest

from ..guarantees.load import Load, Stats
from ..guarantees.report import Row
from .conftest import ServiceFactory
from .faults import CONNECT_KILLED, KAFKA_RESTARTED, PG_RESTARTED, Outage
from .flow import audited, drain, failures, load
from .harness import DebeziumService

pytestmark = [pytest.mark.connect, pytest.mark.slow]

PLAN = Load(keys=50, per_key=40, writers=5, seconds=8.0)
FAULT_AFTER = 2.0


async def run_through(dbz: ServiceFactory, ledger: list[Row], label: str, fault: Outage) -> None:
    fault.require()
    started = time.monotonic()
    notes: list[str] = []
    stats = Stats()
    async with dbz(label) as service:
        await service.register()
        await service.to_debezium()
        writing = asyncio.create_task(load(service, PLAN, stats))
        await asyncio.sleep(FAULT_AFTER)
        try:
            await fault.inject(notes)()
        finally:
            await writing
        drained = await _drain_after(service)
        row = await audited(service, label, started)
        row.notes += [
            *notes,
            f"drained {drained:.1f}s after the load; {stats.rejected_writes} writes rejected "
            f"during the fault and retried ({dict(stats.errors)}); connector "
            f"{service.connector_states()}",
        ]
        ledger.append(row)
    found = failures(row, PLAN.items)
    row.passed = not found
    assert not found, f"{'; '.join(found)}\n{row}"


async def _drain_after(service: DebeziumService) -> float:
    for attempt in range(3):  # the pool's connections died with a PostgreSQL restart
        try:
            return await drain(service, within=180.0)
        except Exception:
            if attempt == 2:
                raise
            await asyncio.sleep(1.0)
    raise AssertionError("unreachable")


async def test_connect_sigkilled_and_restarted(dbz: ServiceFactory, ledger: list[Row]) -> None:
    await run_through(dbz, ledger, "connect-kill", CONNECT_KILLED)


async def test_postgresql_stopped_and_started(dbz: ServiceFactory, ledger: list[Row]) -> None:
    await run_through(dbz, ledger, "pg-restart", PG_RESTARTED)


async def test_kafka_stopped_and_started(dbz: ServiceFactory, ledger: list[Row]) -> None:
    await run_through(dbz, ledger, "kafka-restart", KAFKA_RESTARTED)
