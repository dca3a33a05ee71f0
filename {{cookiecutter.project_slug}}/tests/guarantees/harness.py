"""Runs one guarantees scenario: the service's own processes (api, two workers, two
consumers) on real PostgreSQL and Kafka, load on both boxes, one fault, then an audit that
turns the outcome into numbers (see report.Row)."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from sqlalchemy import func, select, text

from {{ cookiecutter.package_name }}.container import Container, shutdown
from {{ cookiecutter.package_name }}.settings import Settings
from outbox_engine.store.status import ItemStatus

from ..support import (
    INBOX_BOX,
    ITEM_TABLES,
    OUTBOX_BOX,
    PROJECT_ROOT,
    InboxItem,
    OutboxItem,
    boxes_yaml,
    order_violations,
    produce,
    read_topic,
    transport,
)
from .report import Row
from .transports import CREATE_EFFECTS_TABLE, EFFECTS_TABLE, EffectHandler

PACKAGE = "{{ cookiecutter.package_name }}"
EXAMPLE_DOMAIN = {{ "True" if cookiecutter.include_example_domain else "False" }}
WORKERS = ("worker-0", "worker-1")
CONSUMERS = ("consumer-0", "consumer-1")


@dataclass(frozen=True)
class Load:
    """How much each scenario writes: `keys` x `per_key` outbox items from the test's own
    transactions (a sequence number per key), `orders` through the api when the example
    domain is baked in, and `inbox` distinct messages (plus 10% sent twice), produced in
    `inbox_chunks` equal chunks spread over `seconds`."""

    keys: int = 20
    per_key: int = 100
    writers: int = 5
    orders: int = 200
    inbox: int = 1500
    inbox_chunks: int = 5
    seconds: float = 6.0  # the load is spread over this long, so faults land mid-stream

    @property
    def items(self) -> int:
        return self.keys * self.per_key


@dataclass
class Stats:
    """What the load generators saw."""

    rejected_writes: int = 0
    api_created: int = 0
    api_errors: list[tuple[int, str]] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)


@dataclass
class Process:
    """One service process (`python -m <package>.cli ...`), optionally inside a cgroup."""

    name: str
    command: list[str]
    env: dict[str, str]
    log_path: Path
    cgroup: Path | None = None
    popen: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    exit_codes: list[int] = field(default_factory=list)

    def start(self) -> None:
        argv = [sys.executable, "-m", f"{PACKAGE}.cli", *self.command]
        if self.cgroup is not None:
            # The shell joins the cgroup, then becomes the service: every socket it opens
            # belongs to the cgroup, which is what the firewall rules of a fault match.
            argv = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self.cgroup), *argv]
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                argv,
                env=self.env,
                cwd=PROJECT_ROOT,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def exited(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def signal(self, sig: int) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(sig)

    def wait(self, timeout: float) -> int | None:
        if self.popen is None:
            return None
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def tail(self, lines: int = 15) -> str:
        try:
            text_lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text_lines[-lines:])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Stack:
    """api + 2 workers + 2 consumers, restarted like a deployment would restart them when
    one exits on its own (counted in `restarts`)."""

    def __init__(
        self,
        workdir: Path,
        env: dict[str, str],
        worker_env: Mapping[str, Mapping[str, str]] | None = None,
        cgroup: Path | None = None,
        cgroup_members: tuple[str, ...] = (),
    ) -> None:
        self.api_port = free_port()
        self.probe_ports = {name: free_port() for name in WORKERS}
        self.processes: dict[str, Process] = {}
        specs: list[tuple[str, list[str]]] = [
            ("api", ["api", "--host", "127.0.0.1", "--port", str(self.api_port)]),
            *((name, ["worker", "--probe-port", str(self.probe_ports[name])]) for name in WORKERS),
            *((name, ["consumer", "--probe-port", "0"]) for name in CONSUMERS),
        ]
        for name, command in specs:
            self.processes[name] = Process(
                name,
                command,
                {**env, **(worker_env or {}).get(name, {})},
                workdir / f"{name}.log",
                cgroup if name in cgroup_members else None,
            )
        self._stopping = False
        self._supervisor: asyncio.Task[None] | None = None

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def restarts(self) -> int:
        return sum(p.restarts for p in self.processes.values())

    async def start(self) -> None:
        for process in self.processes.values():
            process.start()
        self._supervisor = asyncio.create_task(self._supervise())
        await self._api_ready()

    async def _api_ready(self, within: float = 60.0) -> None:
        deadline = time.monotonic() + within
        last = "no answer"
        async with httpx.AsyncClient(timeout=5.0) as client:
            while time.monotonic() < deadline:
                try:
                    response = await client.get(f"{self.api_url}/readyz")
                    if response.status_code == 200:
                        return
                    last = f"{response.status_code} {response.text[:200]}"
                except httpx.HTTPError as exc:
                    last = f"{type(exc).__name__}: {exc}"
                await asyncio.sleep(0.3)
        raise AssertionError(f"api not ready within {within}s ({last})\n{self.tails()}")

    async def _supervise(self) -> None:
        while not self._stopping:
            for process in self.processes.values():
                code = process.exited()
                if code is not None and not self._stopping:
                    process.exit_codes.append(code)
                    process.restarts += 1
                    process.start()
            await asyncio.sleep(0.3)

    def kill(self, name: str) -> None:
        """SIGKILL and start again at once (no await in between, so the supervisor does not
        count it as a crash)."""
        process = self.processes[name]
        process.signal(signal.SIGKILL)
        process.wait(10)
        process.start()

    async def stop(self) -> None:
        self._stopping = True
        if self._supervisor is not None:
            await self._supervisor
        for process in self.processes.values():
            process.signal(signal.SIGTERM)
        for process in self.processes.values():
            if await asyncio.to_thread(process.wait, 30) is None:
                process.signal(signal.SIGKILL)
                await asyncio.to_thread(process.wait, 10)

    async def worker_health(self) -> str:
        """What each worker's /healthz says (a lane that stopped turning shows there)."""
        answers = []
        async with httpx.AsyncClient(timeout=5.0) as client:
            for name, port in self.probe_ports.items():
                try:
                    response = await client.get(f"http://127.0.0.1:{port}/healthz")
                    answers.append(f"{name} {response.status_code} {response.text[:200]}")
                except httpx.HTTPError as exc:
                    answers.append(f"{name} {type(exc).__name__}")
        return ", ".join(answers)

    def tails(self) -> str:
        return "\n".join(
            f"--- {p.name} (exit codes {p.exit_codes}) ---\n{p.tail()}"
            for p in self.processes.values()
        )


# -- load ----------------------------------------------------------------------------------


def _reason(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    code = getattr(orig, "sqlstate", None) or getattr(exc, "code", None)
    return f"{type(exc).__name__}{f' {code}' if code else ''}"


async def write_sequences(container: Container, load: Load, stats: Stats) -> None:
    """The business transactions of the scenario: per key, items with `seq` 0, 1, 2 ...
    committed one transaction at a time; a rejected transaction is retried."""
    outbox = container.outbox()
    pause = load.seconds / load.per_key

    async def writer(index: int) -> None:
        keys = range(index, load.keys, load.writers)
        for seq in range(load.per_key):
            batch = [
                {"event_key": f"k{key}", "event_name": "seq", "payload": {"seq": seq}}
                for key in keys
            ]
            while True:
                try:
                    async with container.session_factory()() as session, session.begin():
                        await outbox.create_batch(session, OutboxItem, batch)
                    break
                except Exception as exc:  # the scenario's fault, retried like a client would
                    stats.rejected_writes += 1
                    stats.errors[_reason(exc)] += 1
                    await asyncio.sleep(0.2)
            await asyncio.sleep(pause)

    await asyncio.gather(*(writer(i) for i in range(load.writers)))


async def post_orders(api_url: str, load: Load, stats: Stats) -> None:
    """Orders through the api process (each commits an order and its outbox item)."""
    if not EXAMPLE_DOMAIN or not load.orders:
        return
    pause = load.seconds / load.orders * 4
    async with httpx.AsyncClient(base_url=api_url, timeout=30.0) as client:

        async def poster(index: int) -> None:
            for n in range(index, load.orders, 4):
                try:
                    response = await client.post(
                        "/orders", json={"customer_id": f"g{n}", "amount": "10.00"}
                    )
                except httpx.HTTPError as exc:
                    stats.api_errors.append((0, f"{type(exc).__name__}: {exc}"))
                else:
                    if response.status_code == 201:
                        stats.api_created += 1
                    else:
                        stats.api_errors.append((response.status_code, response.text[:300]))
                await asyncio.sleep(pause)

        await asyncio.gather(*(poster(i) for i in range(4)))


def inbox_messages(
    count: int,
) -> tuple[list[str], list[tuple[str, bytes, list[tuple[str, bytes]]]]]:
    ids = [str(uuid.uuid4()) for _ in range(count)]
    messages = [
        (f"p{i % 40}", json.dumps({"n": i}).encode(), [("message-id", mid.encode())])
        for i, mid in enumerate(ids)
    ]
    return ids, messages + messages[::10]  # 10% redelivered by the producer side


def produce_chunk(bootstrap: str, topic: str, chunk: list[Any]) -> None:
    """Produce and wait for every acknowledgement (long enough to outlast a broker outage)."""
    produce(bootstrap, topic, chunk, flush_seconds=240)


async def produce_inbox(bootstrap: str, topic: str, messages: list[Any], load: Load) -> None:
    size = -(-len(messages) // load.inbox_chunks)
    for start in range(0, len(messages), size):
        await asyncio.to_thread(produce_chunk, bootstrap, topic, messages[start : start + size])
        await asyncio.sleep(load.seconds / load.inbox_chunks)


# -- database and Kafka helpers ---------------------------------------------------------------


async def scalar(container: Container, query: Any) -> int:
    async with container.session_factory()() as session:
        return int((await session.execute(query)).scalar_one() or 0)


async def count(container: Container, model: Any, *where: Any) -> int:
    query = select(func.count()).select_from(model)
    for clause in where:
        query = query.where(clause)
    return await scalar(container, query)


async def wait_until(
    check: Callable[[], Awaitable[bool]], within: float, interval: float = 0.3
) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if await check():
                return True
        except Exception:  # the database may be down during the fault; ask again
            pass
        await asyncio.sleep(interval)
    return False


def create_topics(bootstrap: str, topics: list[str], config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, num_partitions=6, config=config) for t in topics])
    for future in futures.values():
        future.result(30)


def run_command(variable: str) -> None:
    """Run the command in environment variable `variable` (a fault's stop/start command)."""
    result = subprocess.run(
        shlex.split(os.environ[variable]), capture_output=True, text=True, timeout=180, check=False
    )
    assert result.returncode == 0, f"{variable} exited {result.returncode}: {result.stderr[-800:]}"


# -- one scenario -----------------------------------------------------------------------------


@dataclass
class Scenario:
    name: str
    # Fault: runs concurrently with the load, once `fault_after` outbox items are delivered.
    fault: Callable[[Run], Awaitable[None]] | None = None
    fault_after: int = 500
    outbox: dict[str, Any] = field(default_factory=dict)  # box settings replaced
    worker_env: dict[str, dict[str, str]] = field(default_factory=dict)
    cgroup: Path | None = None
    cgroup_members: tuple[str, ...] = ()
    drain_within: float = 150.0
    # Items whose id is a multiple of this get the scripted transport's trouble.
    scripted_every: int = 0
    topic_config: dict[str, str] = field(default_factory=dict)
    load: Load = field(default_factory=Load)


@dataclass
class Run:
    """What a fault can reach while the scenario runs."""

    scenario: Scenario
    stack: Stack
    container: Container
    bootstrap: str
    notes: list[str]
    stats: Stats
    facts: dict[str, int] = field(default_factory=dict)


def boxes_file(path: Path, scenario: Scenario, topic: str) -> Path:
    raw = copy.deepcopy(boxes_yaml())
    outbox = raw["outbox"][OUTBOX_BOX]
    outbox.update(
        {
            # Ordered: every scenario must keep each key's first deliveries in creation order.
            "strict_order": True,
            "retry_strategies": ["exponential_backoff"],
            "backoff": {"min_seconds": 0.5, "max_seconds": 5, "multiplier": 2, "jitter": 0.2},
            "max_retries": 200,
            "poll_interval": 0.2,
        }
    )
    outbox.update(copy.deepcopy(scenario.outbox))
    for configured in outbox["transports"]:
        configured.setdefault("args", {})["topic"] = topic
    inbox = raw["inbox"][INBOX_BOX]
    inbox.update(
        {
            "topics": [f"{topic}-in"],
            "group_id": f"{topic}-group",
            "transports": [transport(EffectHandler)],
            "backoff": {"min_seconds": 0.5, "max_seconds": 5, "multiplier": 2, "jitter": 0.2},
            "max_retries": 200,
            "poll_interval": 0.2,
            "session_timeout_ms": 6000,
        }
    )
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


async def fresh_tables(container: Container) -> None:
    async with container.engine().begin() as conn:
        await conn.execute(text(CREATE_EFFECTS_TABLE))
        tables = ", ".join([*ITEM_TABLES, EFFECTS_TABLE])
        await conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))


async def run_scenario(
    scenario: Scenario, database_url: str, bootstrap: str, workdir: Path
) -> tuple[Row, str]:
    """Run the scenario once; return its numbers and, for failure messages, process logs."""
    started = time.monotonic()
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    topic = f"g-{scenario.name}-{uuid.uuid4().hex[:8]}"
    boxes = boxes_file(workdir / "boxes.yaml", scenario, topic)
    await asyncio.to_thread(create_topics, bootstrap, [topic, f"{topic}-in"], scenario.topic_config)
    container = Container()
    container.settings.override(
        Settings(
            database_url=database_url,
            kafka_bootstrap_servers=bootstrap,
            boxes_file=boxes,
            log_format="text",
        )
    )
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "BOXES_FILE": str(boxes),
        "LOG_FORMAT": "text",
        "LOG_LEVEL": "WARNING",
        "OTEL_SDK_DISABLED": "true",
    }
    stack = Stack(workdir, env, scenario.worker_env, scenario.cgroup, scenario.cgroup_members)
    stats = Stats()
    notes: list[str] = []
    inbox_ids, messages = inbox_messages(scenario.load.inbox)
    drained = False
    facts: dict[str, int] = {}
    try:
        await fresh_tables(container)
        await stack.start()
        run = Run(scenario, stack, container, bootstrap, notes, stats, facts)
        load = asyncio.gather(
            write_sequences(container, scenario.load, stats),
            post_orders(stack.api_url, scenario.load, stats),
            produce_inbox(bootstrap, f"{topic}-in", messages, scenario.load),
        )
        if scenario.fault is not None:
            try:
                await wait_until(
                    lambda: _delivered_at_least(container, scenario.fault_after), within=60
                )
                await scenario.fault(run)
            except BaseException:
                load.cancel()  # the fault's own error is the one to report
                await asyncio.gather(load, return_exceptions=True)
                raise
        await load

        async def settled() -> bool:
            pending = await count(
                container, OutboxItem, OutboxItem.status == int(ItemStatus.PENDING)
            )
            inbox_pending = await count(
                container, InboxItem, InboxItem.status == int(ItemStatus.PENDING)
            )
            stored = await count(container, InboxItem)
            return pending == 0 and inbox_pending == 0 and stored >= len(inbox_ids)

        drained = await wait_until(settled, within=scenario.drain_within)
        if not drained:
            notes.append(f"worker /healthz: {await stack.worker_health()}")
    finally:
        await stack.stop()
    try:
        stuck = "" if drained else await describe_pending(container)
        row = await audit(container, bootstrap, topic, inbox_ids)
        if scenario.scripted_every:
            row.scripted = await count(
                container, OutboxItem, OutboxItem.id % scenario.scripted_every == 0
            )
        if row.retried:
            notes.append(f"retried items' last errors: {await retry_reasons(container)}")
    finally:
        # The tests that run after the suite share this database: leave the tables empty
        # (the lock-conn-killed and conn-killed scenarios leave 20,000 inbox rows otherwise).
        try:
            await fresh_tables(container)
        finally:
            await shutdown(container)
    row.scenario = scenario.name
    row.restarts = stack.restarts
    row.seconds = time.monotonic() - started
    if not drained:
        facts["not_drained"] = 1
        notes.append(f"not drained within {scenario.drain_within:.0f}s: {stuck}")
    if stats.rejected_writes:
        reasons = ", ".join(f"{k} x{v}" for k, v in stats.errors.most_common(3))
        notes.append(f"{stats.rejected_writes} writes rejected during the fault ({reasons})")
    if stats.api_errors:
        codes = Counter(code for code, _ in stats.api_errors)
        notes.append(f"api answered {dict(codes)} to {len(stats.api_errors)} order requests")
    row.notes = notes
    row.facts = facts
    return row, stack.tails()


async def describe_pending(container: Container) -> str:
    """Where undelivered items sit, for the failure message."""
    parts = []
    async with container.session_factory()() as session:
        for model in (OutboxItem, InboxItem):
            row = (
                await session.execute(
                    select(
                        func.count(),
                        func.count(func.distinct(model.bucket)),
                        func.max(model.errors_count),
                        func.max(model.next_attempt_at) > func.now(),
                        func.max(model.last_error),
                    ).where(model.status == int(ItemStatus.PENDING))
                )
            ).one()
            parts.append(
                f"{model.__tablename__}: {row[0]} pending in {row[1]} buckets, max errors "
                f"{row[2]}, waiting for backoff {row[3]}, an error: {str(row[4])[:160]}"
            )
    return "; ".join(parts)


async def retry_reasons(container: Container) -> str:
    """The commonest last errors of items delivered after a failed attempt."""
    reason = func.left(OutboxItem.last_error, 120)
    query = (
        select(reason, func.count())
        .where(OutboxItem.errors_count > 0)
        .group_by(reason)
        .order_by(func.count().desc())
        .limit(2)
    )
    async with container.session_factory()() as session:
        rows = (await session.execute(query)).all()
    return "; ".join(f"{reason} x{n}" for reason, n in rows) or "none recorded"


async def _delivered_at_least(container: Container, expected: int) -> bool:
    return (
        await count(container, OutboxItem, OutboxItem.status == int(ItemStatus.DELIVERED))
        >= expected
    )


async def audit(container: Container, bootstrap: str, topic: str, inbox_ids: list[str]) -> Row:
    async with container.session_factory()() as session:
        created = {str(u) for u in (await session.execute(select(OutboxItem.uuid))).scalars()}
        effects = [
            str(u)
            for u in (
                await session.execute(text(f"SELECT message_id FROM {EFFECTS_TABLE}"))
            ).scalars()
        ]
        stored = [str(u) for u in (await session.execute(select(InboxItem.uuid))).scalars()]
    retried = await count(
        container,
        OutboxItem,
        OutboxItem.status == int(ItemStatus.DELIVERED),
        OutboxItem.errors_count > 0,
    )
    received = await asyncio.to_thread(
        read_topic, bootstrap, topic, expect=len(created), timeout=60, settle=1.0
    )
    on_topic = {m.headers.get("message-id", "") for m in received}
    sequences: dict[str, list[int]] = defaultdict(list)
    for message in received:
        try:
            body = json.loads(message.value)
        except ValueError:
            continue
        if isinstance(body, dict) and "seq" in body:
            sequences[message.key].append(int(body["seq"]))
    expected = set(inbox_ids)
    return Row(
        scenario="",
        created=len(created),
        delivered=len(on_topic & created),
        lost=len(created - on_topic),
        phantom=len(on_topic - created),
        out_of_order=order_violations(sequences),
        duplicated=len(received) - len(on_topic),
        inbox_expected=len(expected),
        inbox_stored=len(stored),
        inbox_effects=len(effects),
        # Ids stored or applied that were never produced, or produced and never stored/applied.
        inbox_mismatched=len(set(stored) ^ expected) + len(set(effects) ^ expected),
        retried=retried,
    )
