"""A dead database or broker at start, with real processes: the worker and the consumer say
what they wait for, never "ready" while they cannot reach it, answer `/readyz` with 503 and
the reason, print no traceback, and keep librdkafka's lines in the service's JSON format,
repeats summarised. The healthy run is the control: the same checks pass there."""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.inbox.consumer import InboxConsumer, consumers_readiness

from ..support import PROJECT_ROOT, service_env

CLOSED = "127.0.0.1:1"  # nothing listens on port 1: connections are refused at once
LIBRDKAFKA = "outbox_engine.kafka.librdkafka"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def readyz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def run_until(
    command: str, env: dict[str, str], port: int, want: str, log: Path, within: float = 40.0
) -> tuple[int, str, list[dict[str, Any]], list[str]]:
    """Start `command`, poll `/readyz` until its body (or, once it answers, the log) holds
    `want` (or time runs out), ask `/readyz` once more, stop
    the process with SIGTERM; returns the last status and body, the JSON log records and
    the lines that are not JSON."""
    with log.open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "{{ cookiecutter.package_name }}.cli", command],
            env=env,
            cwd=PROJECT_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        status, body = 0, ""
        try:
            deadline = time.monotonic() + within
            while time.monotonic() < deadline and process.poll() is None:
                status, body = readyz(port)
                if want in body or (status and want in log.read_text(errors="replace")):
                    break
                time.sleep(0.5)
            status, body = readyz(port)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    records, other = [], []
    for line in log.read_text(errors="replace").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            other.append(line)
    return status, body, records, other


def messages(records: list[dict[str, Any]], logger: str | None = None) -> list[str]:
    return [r["message"] for r in records if logger is None or r["logger"] == logger]


@pytest.fixture
def env(container: Container) -> dict[str, str]:
    environment = service_env(
        container, LOG_FORMAT="json", LOG_LEVEL="INFO", PROBE_HOST="127.0.0.1"
    )
    for name in list(environment):
        if name.startswith(("OTEL_", "KAFKA_CONFIG__")) or name == "KAFKA_EXTRA_CONFIG":
            environment.pop(name)
    environment["OTEL_SDK_DISABLED"] = "true"
    return environment


def test_worker_with_kafka_at_a_closed_port(env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    env.update(KAFKA_BOOTSTRAP_SERVERS=CLOSED, WORKER_PROBE_PORT=str(port))
    started = time.monotonic()
    status, body, records, other = run_until(
        "worker", env, port, "cannot reach Kafka", tmp_path / "worker.log"
    )
    # Let the outage last a while before the stop, so there are repeats to summarise.
    assert status == 503, body
    assert body.startswith("not ready: cannot reach Kafka"), body
    assert other == [], other[:5]  # every line is JSON: no raw %3|... line, no traceback
    said = messages(records)
    assert any(m.startswith("worker starting") and f"Kafka at {CLOSED}" in m for m in said)
    assert not any(m.startswith("worker ready") for m in said), said
    assert any(m.startswith("cannot reach Kafka") for m in said), said
    raw = messages(records, LIBRDKAFKA)
    assert raw, "librdkafka's lines should reach the service's logger"
    assert all("Connection refused" in m for m in raw), raw
    assert len(raw) <= 4, f"{len(raw)} librdkafka lines in {time.monotonic() - started:.0f} s"


def test_worker_with_the_database_at_a_closed_port(env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    env.update(
        DATABASE_URL="postgresql+asyncpg://app:s3cret-pw@127.0.0.1:1/app",
        WORKER_PROBE_PORT=str(port),
    )
    status, body, records, other = run_until(
        "worker", env, port, "cannot reach PostgreSQL", tmp_path / "worker.log"
    )
    assert status == 503, body
    assert "cannot reach PostgreSQL at 127.0.0.1:1/app" in body, body
    assert other == [], other[:5]
    said = messages(records)
    assert any(
        m.startswith("worker starting") and "PostgreSQL at 127.0.0.1:1/app" in m for m in said
    )
    assert not any(m.startswith("worker ready") for m in said), said
    failures = [m for m in said if m.startswith("lock connection failed: cannot reach PostgreSQL")]
    assert 1 <= len(failures) <= 2, said  # once, then a summary at most
    assert not any("s3cret-pw" in m for m in said)
    assert "s3cret-pw" not in body


def test_consumer_with_kafka_at_a_closed_port(env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    env.update(KAFKA_BOOTSTRAP_SERVERS=CLOSED, CONSUMER_PROBE_PORT=str(port))
    status, body, records, other = run_until(
        "consumer", env, port, "cannot reach Kafka", tmp_path / "consumer.log"
    )
    assert status == 503, body
    assert other == [], other[:5]
    said = messages(records)
    assert any("starting" in m and f"waiting for Kafka at {CLOSED}" in m for m in said), said
    assert any("cannot reach Kafka" in m or "no Kafka broker reachable" in m for m in said)
    assert not any(": ready:" in m for m in said), said
    raw = messages(records, LIBRDKAFKA)
    assert raw, "librdkafka's lines should reach the service's logger"
    assert len(raw) <= 6, raw  # consumer and admin client: a line and a summary each


def test_consumer_with_the_database_at_a_closed_port(env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    env.update(
        DATABASE_URL="postgresql+asyncpg://app:s3cret-pw@127.0.0.1:1/app",
        CONSUMER_PROBE_PORT=str(port),
    )
    status, body, records, other = run_until(
        "consumer", env, port, "cannot reach PostgreSQL", tmp_path / "consumer.log"
    )
    assert status == 503, body
    assert other == [], other[:5]
    said = messages(records)
    problems = [m for m in said if "cannot reach PostgreSQL" in m]
    assert len(problems) == 1, said
    assert not any(": ready:" in m for m in said), said
    assert not any("s3cret-pw" in m for m in said)


def test_healthy_worker_and_consumer_say_ready(env: dict[str, str], tmp_path: Path) -> None:
    """The control: with both services up, the same checks see "ready" and 200."""
    port = free_port()
    env.update(WORKER_PROBE_PORT=str(port))
    status, body, records, other = run_until(
        "worker", env, port, "worker ready", tmp_path / "w.log"
    )
    assert (status, body.startswith("ok: ")) == (200, True), body
    assert other == [], other[:5]
    assert any(m.startswith("worker ready") for m in messages(records))
    port = free_port()
    env.update(CONSUMER_PROBE_PORT=str(port))
    status, body, records, other = run_until(
        "consumer", env, port, ": ready: Kafka and PostgreSQL answer", tmp_path / "c.log"
    )
    assert status == 200, body
    assert other == [], other[:5]
    assert any(": ready: Kafka and PostgreSQL answer" in m for m in messages(records))
    assert not messages(records, LIBRDKAFKA)
    assert os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "") != CLOSED


def start_lines(
    env: dict[str, str], command: str, port_setting: str, want: str, log: Path
) -> dict[str, list[str]]:
    """What `command` logged of its collector and its event loop, once it answered `/readyz`
    with 200."""
    port = free_port()
    status, body, records, _other = run_until(
        command, {**env, port_setting: str(port)}, port, want, log
    )
    assert status == 200, body
    return {
        "gc": messages(records, "outbox_engine.gc_tuning"),
        "loop": messages(records, "outbox_engine.event_loop"),
    }


def test_each_process_sets_its_collector_and_event_loop(
    env: dict[str, str], tmp_path: Path
) -> None:
    """The worker with the defaults (GC_THRESHOLD 10000, EVENT_LOOP auto: uvloop, which the
    project installs), the consumer with GC_THRESHOLD=2500 and EVENT_LOOP=asyncio, the api
    with GC_THRESHOLD=0 (left alone): each logs what it did once, before it serves."""
    uvloop = importlib.util.find_spec("uvloop") is not None
    cases = [
        (
            "worker",
            "WORKER_PROBE_PORT",
            "worker ready",
            {},
            "(10000, 10, 10)",
            "event loop: uvloop " if uvloop else "event loop: asyncio (uvloop is not installed)",
        ),
        (
            "consumer",
            "CONSUMER_PROBE_PORT",
            "Kafka and PostgreSQL answer",
            {"GC_THRESHOLD": "2500", "EVENT_LOOP": "asyncio"},
            "(2500, 10, 10)",
            "event loop: asyncio (EVENT_LOOP=asyncio)",
        ),
    ]
    for command, port_setting, want, extra, thresholds, loop in cases:
        lines = start_lines(
            {**env, **extra}, command, port_setting, want, tmp_path / f"{command}.log"
        )
        frozen = [int(m.split()[1]) for m in lines["gc"] if m.endswith(f"thresholds {thresholds}")]
        # The imports of a process (SQLAlchemy, pydantic, confluent-kafka, ...) leave far more.
        assert [count > 50_000 for count in frozen] == [True], (command, lines)
        assert [m.startswith(loop) for m in lines["loop"]] == [True], (command, lines)
    env.update(GC_THRESHOLD="0")
    # Python's own thresholds, as this test process has them (no test here changes them).
    assert start_lines(env, "api", "API_PORT", "ready", tmp_path / "api.log")["gc"] == [
        f"gc: left as Python set it, thresholds {gc.get_threshold()}"
    ]


async def test_consumer_readiness_names_what_is_missing(container: Container) -> None:
    """In one process: a consumer whose Kafka is a closed port is not ready, with the reason,
    while one on the real Kafka is; the process answer names the one that is not."""
    box = container.registry().select(None, kind="inbox")[0]
    service = f"readiness-{uuid.uuid4().hex[:8]}"
    good = InboxConsumer(
        box, container.engine(), container.settings().kafka_config(), service, health_interval=0.5
    )
    bad = InboxConsumer(
        box, container.engine(), {"bootstrap.servers": CLOSED}, service, health_interval=0.5
    )
    assert good.readiness()[0] is False  # nothing checked yet
    tasks = [asyncio.create_task(c.run()) for c in (good, bad)]
    try:
        await asyncio.wait_for(good.ready.wait(), 30)
        for _ in range(60):
            if bad.kafka_problem and bad.kafka_problem.startswith("cannot reach Kafka"):
                break
            await asyncio.sleep(0.5)
        assert good.readiness() == (True, f"inbox {box.name}: ok")
        assert consumers_readiness([good]) == (True, "ok: 1 inbox consumers")
        ok, detail = consumers_readiness([good, bad])
        assert ok is False
        assert detail.startswith(f"inbox {box.name} not ready: Kafka: cannot reach Kafka ("), detail
        assert "PostgreSQL" not in detail  # the database answers
        assert not bad.ready.is_set()
    finally:
        for consumer in (good, bad):
            consumer.stop()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 60)
