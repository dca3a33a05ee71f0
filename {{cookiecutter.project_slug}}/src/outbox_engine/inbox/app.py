"""The consumer as a process: one `InboxConsumer` per inbox box, their probes, signals.

The console script's `consumer` command only parses its arguments into a
`ConsumerOptions` and calls `ConsumerApp(...).serve()`. `serve()` starts the probe server
first (a taken port stops the process before it connects, `ProbePortTaken`), runs every
consumer until SIGTERM or SIGINT, then closes the probes and calls `cleanup` (the service
disposes its engine there). Before the consumers run it sets the process's garbage collector
(gc_tuning.py; `ConsumerOptions.gc_threshold`). `/healthz` fails when a consumer's poll loop
has not turned for `stall_seconds`; `/readyz` is every consumer's readiness
(inbox/readiness.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.config.boxes import ConfigError
from outbox_engine.config.registry import Box, BoxRegistry
from outbox_engine.gc_tuning import DEFAULT_GC_THRESHOLD, check_gc_threshold, tune_gc
from outbox_engine.inbox.consumer import InboxConsumer
from outbox_engine.inbox.readiness import consumers_readiness
from outbox_engine.observability.observer import Observer
from outbox_engine.observability.probes import ProbeServer
from outbox_engine.signals import run_until_signal


@dataclass(frozen=True)
class ConsumerOptions:
    """Every knob of a consumer process."""

    # Names the consumer group (`<service_name>.<box>`) unless the box sets `group_id`.
    service_name: str
    # The inbox boxes to consume (empty: every inbox box).
    boxes: tuple[str, ...] = ()
    # The probe port: None turns the probes off, 0 picks a free port (logged).
    probe_port: int | None = None
    probe_host: str = "127.0.0.1"
    # Seconds one Kafka poll waits for messages.
    poll_timeout: float = 1.0
    # Seconds between consumer lag reports, between PostgreSQL checks (and Kafka checks
    # while Kafka does not answer), and between Kafka checks while it answers.
    lag_interval: float = 10.0
    health_interval: float = 5.0
    kafka_check_interval: float = 30.0
    # /healthz fails when a poll loop has not turned for this long.
    stall_seconds: float = 120.0
    # The garbage collector's first threshold, set by `serve()` (gc_tuning.py); 0 leaves
    # Python's collector as it is.
    gc_threshold: int = DEFAULT_GC_THRESHOLD

    def __post_init__(self) -> None:
        check_gc_threshold(self.gc_threshold, "gc_threshold")


def inbox_boxes(registry: BoxRegistry, names: Sequence[str] = ()) -> list[Box]:
    """The inbox boxes to consume; ConfigError (a usage error) when there are none."""
    boxes = registry.select(list(names) or None, kind="inbox")
    if not boxes:
        raise ConfigError(
            "no inbox boxes to consume: configure one under 'inbox:' in the boxes file"
        )
    return boxes


class ConsumerApp:
    """One consumer process (one consumer per selected inbox box): `serve()` runs them
    until a signal. ConfigError when there is no inbox box to consume."""

    def __init__(
        self,
        registry: BoxRegistry,
        engine: AsyncEngine,
        kafka_config: dict[str, Any],
        options: ConsumerOptions,
        *,
        observer: Observer | None = None,
        metrics: Callable[[], bytes] | None = None,
    ) -> None:
        self.options = options
        self.consumers = [
            InboxConsumer(
                box,
                engine,
                kafka_config,
                options.service_name,
                poll_timeout=options.poll_timeout,
                observer=observer,
                lag_interval=options.lag_interval,
                health_interval=options.health_interval,
                kafka_check_interval=options.kafka_check_interval,
            )
            for box in inbox_boxes(registry, options.boxes)
        ]
        self.probes = ProbeServer(
            options.probe_port, self.liveness, self.readiness, metrics, host=options.probe_host
        )

    def liveness(self) -> tuple[bool, str]:
        """Alive while every consumer that polled once polled within `stall_seconds`."""
        now = asyncio.get_running_loop().time()
        stalled = [
            c.box.name
            for c in self.consumers
            if c.last_poll and now - c.last_poll > self.options.stall_seconds
        ]
        return (False, f"consumers stalled: {stalled}") if stalled else (True, "ok")

    def readiness(self) -> tuple[bool, str]:
        return consumers_readiness(self.consumers)

    def stop(self) -> None:
        for consumer in self.consumers:
            consumer.stop()

    async def run(self) -> None:
        await asyncio.gather(*(c.run() for c in self.consumers))

    async def serve(self, cleanup: Callable[[], Awaitable[None]] | None = None) -> None:
        """Probes, then the consumers until SIGTERM/SIGINT; then probes closed and
        `cleanup()` (not called when the probe port is taken: nothing was opened yet)."""
        await self.probes.start()
        try:
            tune_gc(self.options.gc_threshold)
            await run_until_signal(self.run, self.stop)
        finally:
            await self.probes.close()
            if cleanup is not None:
                await cleanup()
