"""Helpers for the tests: migrations, registries with test overrides, a Kafka reader, an
in-process worker, and transports whose behaviour a test controls."""

from __future__ import annotations

import asyncio
import copy
import os
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
import yaml
from alembic import command
from alembic.config import Config
from confluent_kafka import Consumer, KafkaError, TopicPartition
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from {{ cookiecutter.package_name }} import items
from {{ cookiecutter.package_name }}.container import Container
from {{ cookiecutter.package_name }}.db import Base
{% if cookiecutter.include_example_domain -%}
from {{ cookiecutter.package_name }}.domain import models as domain_models
{% endif -%}
from outbox_engine.config.boxes import parse_boxes
from outbox_engine.config.registry import BoxRegistry
from outbox_engine.creation.items import Outbox
from outbox_engine.inbox.consumer import partition_lag
from outbox_engine.middleware import Middlewares
from outbox_engine.relay.app import build_worker
from outbox_engine.relay.options import WorkerOptions
from outbox_engine.relay.worker import Worker
from outbox_engine.store.audit import audit_table
from outbox_engine.store.pauses import pauses_table
from outbox_engine.store.status import ItemStatus
from outbox_engine.transports.base import (
    InboxHandler,
    ItemRecord,
    PermanentFailure,
    Transport,
    TransportUnavailable,
)
from outbox_engine.transports.resources import Resources

PROJECT_ROOT = Path(__file__).resolve().parents[1]
MODEL_MODULES = {% if cookiecutter.include_example_domain %}(items, domain_models){% else %}(items,){% endif %}
ITEM_TABLES = [
    *(table.name for table in Base.metadata.sorted_tables),
    audit_table.name,
    pauses_table.name,
]
OUTBOX_BOX = "{{ cookiecutter.outbox_item }}_outbox_item"
INBOX_BOX = "{{ cookiecutter.inbox_item }}_inbox_item"
OutboxItem = items.{{ cookiecutter.outbox_item.title().replace('_', '') }}OutboxItem
InboxItem = items.{{ cookiecutter.inbox_item.title().replace('_', '') }}InboxItem


@contextmanager
def empty_database(server_url: str, prefix: str) -> Iterator[str]:
    """A new, empty database on the server of `server_url` (whose user may create
    databases), as a postgresql+asyncpg:// URL; dropped afterwards."""
    admin = server_url.replace("postgresql+asyncpg://", "postgresql://", 1)
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"

    async def sql(statement: str) -> None:
        conn = await asyncpg.connect(admin)
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(sql(f'CREATE DATABASE "{name}"'))
    try:
        yield f"{server_url.rpartition('/')[0]}/{name}"
    finally:
        asyncio.run(sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def migrate(database_url: str, revision: str = "head", *, down: bool = False) -> None:
    """alembic upgrade (or, with `down`, downgrade) to `revision`, as `migrate` does (in a
    thread: env.py runs its own loop)."""
    config = Config()
    config.set_main_option("script_location", str(PROJECT_ROOT / "migrations"))
    config.set_main_option("sqlalchemy.url", database_url)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            (command.downgrade if down else command.upgrade)(config, revision)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


def boxes_yaml() -> dict[str, Any]:
    loaded = yaml.safe_load((PROJECT_ROOT / "config" / "boxes.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


class Clock:
    """A clock the test moves (`clock.now += 30.0`), for code that takes a `clock`."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def make_registry(
    outbox: dict[str, Any] | None = None, inbox: dict[str, Any] | None = None
) -> BoxRegistry:
    """The configured boxes with some keys replaced (e.g. transports, retries)."""
    raw = copy.deepcopy(boxes_yaml())
    raw["outbox"][OUTBOX_BOX].update(outbox or {})
    raw["inbox"][INBOX_BOX].update(inbox or {})
    return BoxRegistry(parse_boxes(raw, "test boxes"))


def transport(cls: type[Any], **args: Any) -> dict[str, Any]:
    return {"class": f"{cls.__module__}:{cls.__qualname__}", "args": args}


# -- transports a test controls ----------------------------------------------------------

CALLS: dict[str, list[tuple[str, int, bytes]]] = defaultdict(list)
FAILURES: dict[str, int] = defaultdict(int)


class RecordingTransport(Transport):
    """Records (key, item id, payload) in CALLS[name]; fails while FAILURES[name] > 0."""

    def __init__(self, name: str, mode: str = "error", delay: float = 0.0) -> None:
        self.name = name
        self.mode = mode
        self.delay = delay

    async def __call__(self, item: ItemRecord, payload: bytes) -> bool:
        if self.delay:
            await asyncio.sleep(self.delay)
        CALLS[self.name].append((item.event_key, item.id, payload))
        if payload == b"poison":
            raise PermanentFailure("poison payload")
        if FAILURES[self.name] > 0:
            FAILURES[self.name] -= 1
            if self.mode == "unavailable":
                raise TransportUnavailable("destination down (test)")
            if self.mode == "false":
                return False
            raise RuntimeError("transport failed (test)")
        return True


def reset_transports() -> None:
    CALLS.clear()
    FAILURES.clear()


# -- Kafka ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Received:
    key: str
    value: bytes
    headers: dict[str, str]
    partition: int
    offset: int


def read_topic(
    bootstrap: str, topic: str, expect: int, timeout: float = 60.0, settle: float = 0.0
) -> list[Received]:
    """Read `topic` from the beginning until `expect` messages arrived (or the timeout);
    with `settle`, keep reading that long after to catch extra (duplicate) messages."""
    return consume_topic(bootstrap, topic, expect, _received, timeout, settle)


def _received(message: Any) -> Received:
    key = message.key()
    value = message.value()
    return Received(
        key=key.decode() if isinstance(key, bytes) else "",
        value=value if isinstance(value, bytes) else b"",
        headers=header_dict(message.headers()),
        partition=message.partition() or 0,
        offset=message.offset() or 0,
    )


def consume_topic(
    bootstrap: str,
    topic: str,
    expect: int,
    convert: Callable[[Any], Any],
    timeout: float = 60.0,
    settle: float = 0.0,
) -> list[Any]:
    """`read_topic` with the messages as `convert` makes them (in consumption order)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    received: list[Any] = []
    deadline = time.monotonic() + timeout
    settle_until: float | None = None
    try:
        while time.monotonic() < deadline:
            if settle_until is None and len(received) >= expect:
                settle_until = time.monotonic() + settle
            if settle_until is not None and time.monotonic() >= settle_until:
                break
            for message in consumer.consume(1000, 0.2):
                error = message.error()
                if error is not None:
                    if error.code() in (
                        KafkaError._PARTITION_EOF,
                        KafkaError.UNKNOWN_TOPIC_OR_PART,
                    ):
                        continue
                    raise RuntimeError(str(error))
                received.append(convert(message))
    finally:
        consumer.close()
    return received


def header_dict(raw: Any) -> dict[str, str]:
    pairs = raw.items() if isinstance(raw, dict) else (raw or [])
    return {str(k): v.decode() if isinstance(v, bytes) else str(v or "") for k, v in pairs}


def order_violations(sequences: dict[str, list[int]]) -> int:
    """Per key, how often a first appearance is out of creation order."""
    violations = 0
    for values in sequences.values():
        seen: set[int] = set()
        last = None
        for value in values:
            if value in seen:
                continue
            seen.add(value)
            if last is not None and value < last:
                violations += 1
            last = value
    return violations


# -- the worker, in process ----------------------------------------------------------------

# Fault tests that stop and start the test broker run only where these commands are given.
needs_kafka_control = pytest.mark.skipif(
    not all(os.environ.get(v) for v in ("TEST_KAFKA_STOP_CMD", "TEST_KAFKA_START_CMD")),
    reason="set TEST_KAFKA_STOP_CMD and TEST_KAFKA_START_CMD to commands that stop and start "
    "the test broker",
)


async def delivered_at_least(container: Container, expected: int) -> bool:
    """Whether at least `expected` outbox items are marked delivered (for `wait_for`)."""
    query = (
        select(func.count())
        .select_from(OutboxItem)
        .where(OutboxItem.status == int(ItemStatus.DELIVERED))
    )
    async with container.session_factory()() as session:
        return int((await session.execute(query)).scalar_one()) >= expected


async def create_numbered(container: Container, start: int, n: int, keys: int = 10) -> None:
    """Items `start` .. `start + n - 1` in one transaction: `{"seq": i}` on key `i % keys`."""
    async with container.session_factory()() as session, session.begin():
        await container.outbox().create_batch(
            session,
            OutboxItem,
            [
                {"event_key": str(i % keys), "event_name": "seq", "payload": {"seq": i}}
                for i in range(start, start + n)
            ],
        )


async def create_due_in(
    container: Container, seconds: float, payload: bytes, key: str = "k"
) -> None:
    """One item on `key` that becomes claimable `seconds` after its commit: its NOTIFY wakes
    the lanes while it is not due yet, and nothing announces it when it is."""
    async with container.session_factory()() as session, session.begin():
        await container.outbox().create(
            session, OutboxItem, event_key=key, event_name="e", payload=payload
        )
        await session.execute(
            text(
                f"UPDATE {OutboxItem.__tablename__} SET next_attempt_at = "
                "now() + make_interval(secs => :s) WHERE payload = :p"
            ),
            {"s": seconds, "p": payload},
        )


@asynccontextmanager
async def running_worker(
    container: Container,
    registry: BoxRegistry,
    boxes: list[str] | None = None,
    concurrency: int = 1,
    middlewares: Middlewares | None = None,
    rebalance_interval: float = 0.2,
    join_lanes: bool = False,
) -> AsyncIterator[Worker]:
    options = WorkerOptions(
        boxes=tuple(boxes or ()),
        concurrency=concurrency,
        join_lanes=join_lanes,
        rebalance_interval=rebalance_interval,
        shutdown_timeout=10.0,
    )
    worker = build_worker(
        registry, container.resources(), container.settings().asyncpg_dsn, options, middlewares
    )
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(worker.ready.wait(), 10)
        yield worker
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)


async def wait_for(
    check: Callable[[], Awaitable[bool]], within: float = 30.0, interval: float = 0.05
) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(interval)
    raise AssertionError(f"condition not met within {within}s")


class Claims:
    """Counts the claims a running worker's lanes make on one box (`count`, resettable) and
    keeps each claim's buckets (`buckets`)."""

    def __init__(self, worker: Worker, box: str = OUTBOX_BOX) -> None:
        self.count = 0
        self.buckets: list[list[int]] = []
        claimer = worker.processors[box].claimer
        original = claimer.claim

        async def counted(buckets: Sequence[int], paused_keys: Any = ()) -> Any:
            self.count += 1
            self.buckets.append(list(buckets))
            return await original(buckets, paused_keys)

        claimer.claim = counted  # type: ignore[method-assign]


def lane_keys(registry: BoxRegistry, lane: int, count: int, lanes: int) -> list[str]:
    """`count` keys of the outbox box whose buckets are all in lane `lane` of `lanes`
    (bucket % lanes == lane)."""
    box = registry.get(OUTBOX_BOX)
    keys = (str(n) for n in range(100_000))
    return [k for k in keys if box.bucket_for(k) % lanes == lane][:count]


async def lanes_idle(worker: Worker, lanes: int, box: str = OUTBOX_BOX) -> None:
    """Wait until `lanes` lanes of `box` wait idle (for a NOTIFY or the idle probe)."""

    async def check() -> bool:
        return len(worker.probe.idle_lanes(box)) == lanes

    await wait_for(check, within=10)


# -- processes and Kafka producers -------------------------------------------------------------


def service_env(container: Container, **extra: str) -> dict[str, str]:
    """The environment of a service process that uses this test run's database and Kafka."""
    import os

    settings = container.settings()
    env = {
        **os.environ,
        "DATABASE_URL": settings.database_url,
        "KAFKA_BOOTSTRAP_SERVERS": settings.kafka_bootstrap_servers,
        "BOXES_FILE": str(settings.boxes_file),
        "LOG_FORMAT": "text",
        "LOG_LEVEL": "WARNING",
    }
    env.update(extra)
    return env


def spawn(command: list[str], env: dict[str, str]) -> Any:
    import subprocess
    import sys

    return subprocess.Popen(
        [sys.executable, "-m", "{{ cookiecutter.package_name }}.cli", *command],
        env=env,
        cwd=PROJECT_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


KafkaMessage = tuple[str | None, bytes | None, Sequence[tuple[str, bytes | None]]]


def produce(
    bootstrap: str,
    topic: str,
    messages: Sequence[KafkaMessage],
    flush_seconds: float = 60.0,
    config: dict[str, Any] | None = None,
) -> None:
    """Produce (key, value, headers) messages and wait up to `flush_seconds` until every one
    is acknowledged (`config`: producer settings besides the defaults, e.g. a larger
    `message.max.bytes`)."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            **(config or {}),
        }
    )
    failures: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    for key, value, headers in messages:
        while True:
            try:
                producer.produce(
                    topic, value, key, headers=[(k, v) for k, v in headers], on_delivery=on_delivery
                )
                break
            except BufferError:
                producer.poll(0.1)
    remaining = producer.flush(flush_seconds)
    assert remaining == 0, f"{remaining} messages not delivered"
    assert not failures, failures[:3]


class RecordingHandler(InboxHandler):
    """Writes an outbox item for every message, then fails while FAILURES[name] > 0: a
    failed attempt must leave none of its writes behind."""

    def __init__(self, name: str, emit: bool = True) -> None:
        self.name = name
        self.emit = emit
        self._outbox: Outbox | None = None

    async def setup(self, resources: Resources) -> None:
        self._outbox = resources.outbox

    async def handle(self, item: ItemRecord, payload: bytes, session: AsyncSession) -> bool:
        assert self._outbox is not None
        if self.emit:
            await self._outbox.create(
                session, OutboxItem, event_key=item.event_key, event_name="handled", payload=payload
            )
        CALLS[self.name].append((item.event_key, item.id, payload))
        if payload == b"fail" and FAILURES[self.name] > 0:
            FAILURES[self.name] -= 1
            raise RuntimeError("handler failed (test)")
        return True


def uncommitted(bootstrap: str, topic: str, group: str) -> int:
    """Messages of `topic` after `group`'s committed offsets, all partitions (a partition
    with none committed counts from its start), as the broker says."""
    return sum(uncommitted_by_partition(bootstrap, topic, group).values())


def uncommitted_by_partition(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    """`uncommitted` per partition: partition -> messages after `group`'s committed offset
    (only partitions with some), for a failure's notes."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        partitions = reader.list_topics(topic, timeout=30).topics[topic].partitions
        committed = reader.committed([TopicPartition(topic, p) for p in partitions], timeout=30)
        behind = [partition_lag(reader, tp) for tp in committed]  # the consumer's own count
    finally:
        reader.close()
    if any(lag is None for lag in behind):
        raise RuntimeError(f"the broker did not say where {topic} ends: {behind}")
    return {tp.partition: lag for tp, lag in zip(committed, behind, strict=True) if lag}
