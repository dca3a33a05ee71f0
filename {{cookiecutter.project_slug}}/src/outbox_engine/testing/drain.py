"""`drain(container, box)`: run a real worker on a box until none of its items is pending,
with an outbox box's transports replaced by a `RecordingTransport` (what it was handed is
returned); `Container` is what the helpers need of a service's container."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from outbox_engine.config.boxes import BoxesConfig
from outbox_engine.config.registry import Box, BoxRegistry
from outbox_engine.relay.app import build_worker
from outbox_engine.relay.options import WorkerOptions
from outbox_engine.store.probe_items import count_pending
from outbox_engine.transports.base import ItemRecord, Transport
from outbox_engine.transports.resources import Resources


class _Settings(Protocol):
    @property
    def asyncpg_dsn(self) -> str: ...


class Container(Protocol):
    """What the helpers need of a service's dependency container (the service's
    `container.Container` has it): a session factory, the registry, the shared resources
    and the settings with the asyncpg DSN."""

    @property
    def session_factory(self) -> Callable[[], async_sessionmaker[AsyncSession]]: ...
    @property
    def registry(self) -> Callable[[], BoxRegistry]: ...
    @property
    def resources(self) -> Callable[[], Resources]: ...
    @property
    def settings(self) -> Callable[[], _Settings]: ...


class RecordingTransport(Transport):
    """An outbox transport that records what it is handed and succeeds."""

    def __init__(self) -> None:
        self.delivered: list[tuple[ItemRecord, bytes]] = []

    async def __call__(self, item: ItemRecord, payload: bytes) -> bool:
        self.delivered.append((item, payload))
        return True


@dataclass(frozen=True)
class Delivered:
    """An item the recording transport was handed."""

    item: ItemRecord
    payload: bytes

    @property
    def data(self) -> Any:
        return json.loads(self.payload)


def _registry_for(base: BoxRegistry, box_name: str, record: bool) -> BoxRegistry:
    """`base`, or with `record` and an outbox box, its configuration again with the box's
    transports replaced by a `RecordingTransport`."""
    raw = base.config.model_dump(by_alias=True)
    if not (record and box_name in raw["outbox"]):
        return base
    path = f"{RecordingTransport.__module__}:{RecordingTransport.__qualname__}"
    raw["outbox"][box_name]["transports"] = [{"class": path}]
    return BoxRegistry(BoxesConfig.model_validate(raw))


async def _pending(container: Container, box: Box) -> int:
    async with container.session_factory()() as session:
        return await count_pending(session, box.table)


async def drain(
    container: Container,
    box: str,
    *,
    record: bool = True,
    within: float = 30.0,
    until: Callable[[], Awaitable[bool]] | None = None,
    registry: BoxRegistry | None = None,
) -> list[Delivered]:
    """Run a worker on `box` until none of its items is pending (or `until()`, an async
    predicate, holds); AssertionError after `within` seconds, with the count left. An
    outbox box relays to a `RecordingTransport` unless `record=False`; the items it was
    handed are returned, in the order handed. `registry` replaces the container's (e.g. a
    registry with other handlers for a test)."""
    registry = _registry_for(registry or container.registry(), box, record)
    target = registry.get(box)
    options = WorkerOptions(
        boxes=(box,), rebalance_interval=0.2, shutdown_timeout=10.0, application_name="test-drain"
    )
    worker = build_worker(
        registry, container.resources(), container.settings().asyncpg_dsn, options
    )
    task = asyncio.create_task(worker.run())
    deadline = time.monotonic() + within
    try:
        await asyncio.wait_for(worker.ready.wait(), within)
        while True:
            done = await until() if until is not None else await _pending(container, target) == 0
            if done:
                break
            if task.done():
                await task  # raises what stopped the worker
            if time.monotonic() > deadline:
                left = await _pending(container, target)
                raise AssertionError(f"box {box}: {left} items still pending after {within}s")
            await asyncio.sleep(0.05)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)
    recorded: list[Delivered] = []
    for bound in target.transports:
        if isinstance(bound.transport, RecordingTransport):
            recorded += [Delivered(i, p) for i, p in bound.transport.delivered]
    return recorded
