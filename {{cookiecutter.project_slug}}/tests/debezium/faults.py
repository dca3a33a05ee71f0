"""The faults of the Debezium tests: the Kafka Connect worker SIGKILLed and started again,
PostgreSQL stopped and started, Kafka stopped and started, each by the commands in the
environment (the template's scripts/test.sh exports them for its own services). A test
whose commands are missing fails with how to provide them (a fault test that did not
inject its fault proves nothing)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from ..guarantees.supervise import run_command
from .connect import FAULT_HOW_TO

CONNECT_CONTROL = ("TEST_CONNECT_KILL_CMD", "TEST_CONNECT_START_CMD")
PG_CONTROL = ("TEST_PG_STOP_CMD", "TEST_PG_START_CMD")
KAFKA_CONTROL = ("TEST_KAFKA_STOP_CMD", "TEST_KAFKA_START_CMD")


@dataclass(frozen=True)
class Outage:
    name: str
    stop: str  # environment variable with the command that stops (or SIGKILLs) the server
    start: str
    down_seconds: float
    what: str  # for the how-to

    def require(self) -> None:
        unset = [v for v in (self.stop, self.start) if not os.environ.get(v)]
        if unset:
            pytest.fail(
                FAULT_HOW_TO.format(names=" and ".join(unset), what=self.what), pytrace=False
            )

    def inject(self, notes: list[str]) -> Callable[[], Awaitable[None]]:
        async def fault() -> None:
            started = time.monotonic()
            await asyncio.to_thread(run_command, self.stop)
            try:
                await asyncio.sleep(self.down_seconds)
            finally:
                await asyncio.to_thread(run_command, self.start)
            notes.append(f"{self.name}: down {time.monotonic() - started:.1f}s (restart included)")

        return fault


CONNECT_KILLED = Outage(
    "Kafka Connect SIGKILLed", *CONNECT_CONTROL, 1.0, "SIGKILL and start the Connect worker"
)
PG_RESTARTED = Outage("PostgreSQL stopped", *PG_CONTROL, 3.0, "stop and start the test PostgreSQL")
KAFKA_RESTARTED = Outage("Kafka stopped", *KAFKA_CONTROL, 5.0, "stop and start the test broker")
