"""`generate item` and `generate transport` in a copy of this project: the new boxes
migrate on a fresh database and work without a manual edit (outbox -> Kafka, Kafka ->
inbox handler); existing files are never overwritten."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import pytest

from ..services import Services
from ..support import PROJECT_ROOT, empty_database, produce, read_topic

PACKAGE = "{{ cookiecutter.package_name }}"
IGNORE = shutil.ignore_patterns(
    ".venv", ".git", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", "*.egg-info"
)


def next_revisions() -> tuple[str, str]:
    """The ids the generator gives the next two revisions (after the highest number)."""
    numbers = [
        int(p.name[:4]) for p in (PROJECT_ROOT / "migrations" / "versions").glob("[0-9]*.py")
    ]
    return f"{max(numbers) + 1:04d}", f"{max(numbers) + 2:04d}"


FIRST, SECOND = next_revisions()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("generate") / "project"
    shutil.copytree(PROJECT_ROOT, copy, ignore=IGNORE)
    return copy


@pytest.fixture(scope="module")
def fresh_database(services: Services) -> Iterator[str]:
    with empty_database(services.database_url, "test_gen") as url:
        yield url


def env_for(project: Path, **extra: str) -> dict[str, str]:
    """Run the copy's code (PYTHONPATH wins over the editable install of the original)."""
    drop = ("DATABASE_URL", "KAFKA_BOOTSTRAP_SERVERS", "BOXES_FILE", "MIGRATIONS_DIR")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(PYTHONPATH=str(project / "src"), LOG_FORMAT="text", LOG_LEVEL="WARNING", **extra)
    return env


def run(project: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", f"{PACKAGE}.cli", *args],
        env=env_for(project, **extra),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=180,
    )


def tree(project: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(project)): p.read_bytes()
        for p in sorted(project.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_generators_write_working_files_and_refuse_to_overwrite(project: Path) -> None:
    made = run(project, "generate", "item", "audit_log", "--kind", "outbox")
    assert made.returncode == 0, made.stderr
    assert made.stdout.splitlines() == [
        f"wrote migrations/versions/{FIRST}_audit_log_outbox_items.py",
        "wrote src/{{ cookiecutter.package_name }}/transports/audit_log_outbox_item.py",
        "wrote src/{{ cookiecutter.package_name }}/items.py",
        "wrote config/boxes.yaml",
    ]
    made = run(project, "generate", "item", "audit", "--kind", "inbox")
    assert made.returncode == 0, made.stderr
    made = run(
        project,
        "generate",
        "transport",
        "audit_log_outbox_item",
        "audit_webhook",
        "--event",
        "audit_recorded",
    )
    assert made.returncode == 0, made.stderr
    assert "wrote src/{{ cookiecutter.package_name }}/transports/audit_webhook.py" in made.stdout

    before = tree(project)
    for args, message in [
        (("item", "audit_log", "--kind", "outbox"), "box audit_log_outbox_item exists already"),
        (
            ("transport", "audit_log_outbox_item", "audit_webhook"),
            "audit_webhook.py exists already",
        ),
        (("transport", "audit_log_outbox_item", "audit_webhook", "--event", "x"), "exists already"),
        (("transport", "nope", "x"), "unknown box 'nope'"),
        (("item", "Audit-Log", "--kind", "outbox"), "must be snake_case"),
        (("item", "x'; drop table y; --", "--kind", "outbox"), "must be snake_case"),
        (("item", "a" * 40, "--kind", "inbox"), "at most 29 characters"),
    ]:
        refused = run(project, "generate", *args)
        assert refused.returncode == 2, (args, refused.stdout)
        assert message in refused.stderr, (args, refused.stderr)
    assert tree(project) == before

    boxes = (project / "config" / "boxes.yaml").read_text()
    assert boxes.startswith("# Boxes of")  # comments survive
    assert 'topic: "${AUDIT_LOG_EVENTS_TOPIC:-audit_logs}"' in boxes
    assert 'event_name: "audit_recorded"' in boxes
    # The generated code is as clean as the rest of the project.
    generated = [
        f"migrations/versions/{FIRST}_audit_log_outbox_items.py",
        f"migrations/versions/{SECOND}_audit_inbox_items.py",
        f"src/{PACKAGE}/items.py",
        f"src/{PACKAGE}/transports/audit_log_outbox_item.py",
        f"src/{PACKAGE}/transports/audit_inbox_item.py",
        f"src/{PACKAGE}/transports/audit_webhook.py",
    ]
    for ruff in (["check"], ["format", "--check"]):
        lint = subprocess.run(
            [sys.executable, "-m", "ruff", *ruff, *generated],
            cwd=project,
            capture_output=True,
            text=True,
        )
        assert lint.returncode == 0, lint.stdout + lint.stderr


def test_generated_boxes_migrate_and_run(
    project: Path, fresh_database: str, services: Services
) -> None:
    if not (project / "migrations" / "versions" / f"{SECOND}_audit_inbox_items.py").exists():
        pytest.skip("needs the files of the test above")
    topic = f"test-gen-{uuid.uuid4().hex[:10]}"
    settings = {
        "DATABASE_URL": fresh_database,
        "KAFKA_BOOTSTRAP_SERVERS": services.kafka_bootstrap_servers,
        "AUDIT_LOG_EVENTS_TOPIC": topic,
        "AUDIT_EVENTS_TOPIC": f"{topic}-in",
    }
    migrated = run(project, "migrate", **settings)
    assert migrated.returncode == 0, migrated.stderr
    listed = run(project, "check-config", **settings)
    assert listed.returncode == 0, listed.stderr
    assert "outbox audit_log_outbox_item: table audit_log_outbox_items" in listed.stdout
    assert "inbox  audit_inbox_item: table audit_inbox_items" in listed.stdout

    # Outbox: two items through the create API, relayed by a worker with no edit.
    create = (
        "import asyncio\n"
        f"from {PACKAGE}.container import Container, shutdown\n"
        f"from {PACKAGE}.items import AuditLogOutboxItem\n"
        "async def main():\n"
        "    c = Container()\n"
        "    async with c.session_factory()() as s, s.begin():\n"
        "        for name in ('audit_recorded', 'audit_other'):\n"
        "            await c.outbox().create(s, AuditLogOutboxItem, event_key='k1',\n"
        "                                    event_name=name, payload={'e': name})\n"
        "    await shutdown(c)\n"
        "asyncio.run(main())\n"
    )
    created = subprocess.run(
        [sys.executable, "-c", create],
        env=env_for(project, **settings),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert created.returncode == 0, created.stderr
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", f"{PACKAGE}.cli", *args],
            env=env_for(project, **settings),
            cwd=project,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for args in (
            ("worker", "--box", "audit_log_outbox_item", "--box", "audit_inbox_item"),
            ("consumer", "--box", "audit_inbox_item"),
        )
    ]
    try:
        received = read_topic(services.kafka_bootstrap_servers, topic, expect=2, timeout=90)
        assert sorted(m.headers["event-name"] for m in received) == [
            "audit_other",
            "audit_recorded",
        ]
        assert {m.key for m in received} == {"k1"}
        # Inbox: a message on its topic is stored by the consumer and handled by the worker.
        produce(
            services.kafka_bootstrap_servers,
            f"{topic}-in",
            [
                (
                    "a1",
                    b'{"x": 1}',
                    [("message-id", str(uuid.uuid4()).encode()), ("event-name", b"audited")],
                )
            ],
        )
        assert wait_rows(fresh_database, "audit_inbox_items", 2, 1), "inbox item not handled"
        assert wait_rows(fresh_database, "audit_log_outbox_items", 2, 2)
    finally:
        for process in workers:
            process.terminate()
        for process in workers:
            process.wait(30)
    for process in workers:
        assert process.returncode == 0, process.stderr.read().decode() if process.stderr else ""


def wait_rows(database_url: str, table: str, status: int, n: int, within: float = 60.0) -> bool:
    dsn = database_url.replace("postgresql+asyncpg://", "postgresql://", 1)

    async def count() -> int:
        conn = await asyncpg.connect(dsn)
        try:
            return int(
                await conn.fetchval(f"SELECT count(*) FROM {table} WHERE status = $1", status)
            )
        finally:
            await conn.close()

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if asyncio.run(count()) >= n:
            return True
        time.sleep(0.5)
    return False
