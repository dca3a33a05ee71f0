"""A lane backing off from a Kafka outage is woken when the worker's Kafka check finds the
broker answering again (relay/lanes.py, relay/readiness.py): on a real broker stopped and
started, with the timeline of the lane's batches. Marked slow (about a minute)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shlex
import subprocess
import time
from collections.abc import Awaitable, Callable, Sequence

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from sqlalchemy import func, select

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.config.registry import Box
from outbox_engine.observability.observer import Observer
from outbox_engine.relay.app import build_worker
from outbox_engine.relay.options import WorkerOptions
from outbox_engine.transports.base import ItemRecord
from outbox_engine.transports.kafka import KafkaProducer

from ..support import (
    OutboxItem,
    create_numbered,
    delivered_at_least,
    make_registry,
    needs_kafka_control,
    read_topic,
    wait_for,
)

pytestmark = pytest.mark.slow


class BatchTimes(Observer):
    """When each batch was claimed, and when each batch that found the destination
    unavailable ended (loop time): the lane backs off after it. (Its other items are
    `deferred`: later items of a key whose first did not go.)"""

    def __init__(self) -> None:
        self.claims: list[float] = []
        self.unavailable: list[float] = []

    def claimed(self, box: Box, count: int) -> None:
        self.claims.append(asyncio.get_running_loop().time())

    def outcomes(self, box: Box, results: Sequence[tuple[ItemRecord, str]], seconds: float) -> None:
        if any(outcome == "unavailable" for _, outcome in results):
            self.unavailable.append(asyncio.get_running_loop().time())

    def backed_off(self, times: int) -> Callable[[], Awaitable[bool]]:
        """A check for `wait_for`: the lane began its `times`-th outage back-off."""

        async def check() -> bool:
            return len(self.unavailable) >= times

        return check


def broker_answers(bootstrap: str, within: float) -> bool:
    """Whether a new client gets the cluster's metadata within `within` seconds."""
    admin = AdminClient(
        {"bootstrap.servers": bootstrap, "reconnect.backoff.max.ms": 200, "log_level": 0}
    )
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        with contextlib.suppress(KafkaException):
            if admin.list_topics(timeout=0.5).brokers:
                return True
        time.sleep(0.1)
    return False


@needs_kafka_control
async def test_delivery_resumes_within_a_kafka_check_of_the_brokers_return(
    container: Container, env_topics: str
) -> None:
    """A lane backs off from an outage 0.5 s doubling to 30 s; the worker's Kafka check
    ends the back-off when Kafka answers again and starts it over, so delivery does not
    wait out the rest of it. The producer times out in 1 s here (25 s by default) so the
    back-off reaches 30 s in ~38 s. The broker is started as the lane begins that 30 s
    back-off and answers 3-20 s later (machine-dependent; asserted under 26 s): a lane that
    slept on would claim again only when the 30 s are up, 4 s or more after the broker's
    return, and here it must claim within 4 s of it. The worker's check can see
    the broker before this test's own client does, so the lane may resume before `back`.
    Attempts after the wake-up can still time out (the broker answers metadata before it
    takes writes: 0-6 s on these machines); the back-off then starts over from 0.5 s, so
    delivery follows the broker's readiness for writes by about as long again at most."""
    settings = container.settings()
    bootstrap = settings.kafka_bootstrap_servers
    producer = KafkaProducer(
        {**settings.kafka_config(), "message.timeout.ms": 1000, "reconnect.backoff.max.ms": 500}
    )
    times = BatchTimes()
    resources = dataclasses.replace(container.resources(), producer=producer, observer=times)
    options = WorkerOptions(concurrency=1, rebalance_interval=0.2, kafka_check_interval=0.5)
    worker = build_worker(make_registry(), resources, settings.asyncpg_dsn, options)

    loop = asyncio.get_running_loop()
    run = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(worker.ready.wait(), 10)
        await create_numbered(container, 0, 20)
        await wait_for(lambda: delivered_at_least(container, 20), within=30)
        await asyncio.to_thread(
            subprocess.run, shlex.split(os.environ["TEST_KAFKA_STOP_CMD"]), check=True
        )
        start_command = shlex.split(os.environ["TEST_KAFKA_START_CMD"])
        starting: asyncio.subprocess.Process | None = None
        try:
            await create_numbered(container, 20, 50)
            await wait_for(times.backed_off(7), within=120)
            longest = times.unavailable[6]  # its back-off is the cap, 30 s
            starting = await asyncio.create_subprocess_exec(*start_command)
            assert await asyncio.to_thread(broker_answers, bootstrap, 60.0)
            back = loop.time()
        finally:
            if starting is None:
                await asyncio.to_thread(subprocess.run, start_command, check=True)
            else:
                assert await asyncio.wait_for(starting.wait(), 120) == 0
        await wait_for(lambda: delivered_at_least(container, 70), within=60)
        delivered = loop.time()
    finally:
        worker.stop()
        await asyncio.wait_for(run, 30)
        await producer.close()
    timeline = (
        f"30 s back-off began at 0, broker answered at {back - longest:.1f} s, all delivered "
        f"at {delivered - longest:.1f} s; back-offs began at "
        f"{[round(t - longest, 1) for t in times.unavailable]}, batches claimed at "
        f"{[round(t - longest, 1) for t in times.claims if t > longest]}"
    )
    # Only a broker that answers well inside the 30 s tells a woken lane from one that slept.
    assert back - longest < 26.0, f"the broker answered too late to tell: {timeline}"
    # Woken, not left to sleep out the 30 s: the lane's first claim after that back-off
    # began came within 4 s of the broker's return (a sleeping lane claims at 30 s, more than
    # 4 s after it). Whether that claim delivers is the broker's business (below).
    woken = [t for t in times.claims if t > longest]
    assert woken, timeline
    assert woken[0] - back < 4.0, timeline
    # A claim came after the last batch that found Kafka unavailable (the one that delivered).
    resumed = [t for t in times.claims if t > times.unavailable[-1]]
    assert resumed, timeline
    # Every back-off after the wake-up starts over (0.5 s, 1 s, 2 s, ...): the gap from a
    # batch that found Kafka unavailable to the next claim stays on that schedule.
    after = [t for t in times.unavailable if t >= woken[0]]
    gaps = [min(c for c in times.claims if c > u) - u for u in after]
    assert all(gap < 0.5 * 2**i + 0.5 for i, gap in enumerate(gaps)), (gaps, timeline)
    assert delivered - back < 15.0, timeline
    async with container.session_factory()() as session:
        errors = (await session.execute(select(func.sum(OutboxItem.errors_count)))).scalar_one()
    assert errors == 0
    received = read_topic(bootstrap, env_topics, expect=70)
    assert len({m.headers["message-id"] for m in received}) == 70
