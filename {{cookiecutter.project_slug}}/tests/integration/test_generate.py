"""`generate item` and `generate transport` in a copy of this project: the new boxes
migrate on a fresh database and work without a manual edit (outbox -> Kafka, Kafka ->
inbox handler); existing files are never overwritten; config/boxes.yaml keeps every line
it had, comments included, and still loads."""

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

from {{ cookiecutter.package_name }}.ops import boxes_edit
from {{ cookiecutter.package_name }}.ops.errors import OpsError
from {{ cookiecutter.package_name }}.ops.generate import ProjectFiles, generate_item, generate_transport
from outbox_engine.config.boxes import load_boxes

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


# Comments where a round trip could drop or move them: before a section, after a box's last
# line, between boxes, inline, and at the end of the file.
EXTRA_COMMENTS = (
    "\n# The outbox boxes follow.\n",
    "  # end of the outbox section\n\n# Inbox boxes.\n",
    "# the last line of the file\n",
)


@pytest.fixture
def sources(tmp_path: Path) -> ProjectFiles:
    """The parts of this project `generate` reads and writes, copied, with extra comments in
    config/boxes.yaml."""
    for part in ("config", "migrations", f"src/{PACKAGE}"):
        shutil.copytree(PROJECT_ROOT / part, tmp_path / part, ignore=IGNORE)
    boxes = tmp_path / "config" / "boxes.yaml"
    text = boxes.read_text()
    head, _, rest = text.partition("\noutbox:\n")
    outbox, _, inbox = rest.partition("\ninbox:\n")
    first = outbox.splitlines(keepends=True)
    first[0] = first[0].rstrip("\n") + "  # the first outbox box\n"
    boxes.write_text(
        head
        + EXTRA_COMMENTS[0]
        + "outbox:\n"
        + "".join(first)
        + EXTRA_COMMENTS[1]
        + "inbox:\n"
        + inbox
        + EXTRA_COMMENTS[2]
    )
    return ProjectFiles.find(tmp_path)


def subsequence(lines: list[str], of: list[str]) -> bool:
    found = iter(of)
    return all(line in found for line in lines)


def test_adding_boxes_and_transports_keeps_every_line_of_the_boxes_file(
    sources: ProjectFiles,
) -> None:
    original = sources.boxes.read_text().splitlines()
    before = load_boxes(sources.boxes)
    comments = [line for line in original if line.lstrip().startswith("#") or " # " in line]
    assert len(comments) >= 10, comments
    generate_item(sources, "ledger", "outbox")
    generate_item(sources, "refund_note", "inbox")
    generate_transport(sources, "ledger_outbox_item", "ledger_mirror", "ledger_posted")
    inbox_box = next(iter(before.inbox))
    generate_transport(sources, inbox_box, "audit_trail")
    edited = sources.boxes.read_text().splitlines()
    # Every line the file had is still there, unchanged and in its order: comments, blank
    # lines, flow mappings and quoting alike; only the new entries were added.
    assert subsequence(original, edited), "\n".join(edited)
    assert len(edited) == len(original) + 8 + 7 + 2 + 1
    assert edited[-1] == "# the last line of the file"
    # The section's closing comments still close it: they follow the new box (its last line
    # the transport added to it), not precede it.
    closing = edited.index("  # end of the outbox section")
    assert edited[closing - 3 : closing] == [
        '          topic: "${LEDGER_EVENTS_TOPIC:-ledgers}"',
        f"      - class: {PACKAGE}.transports.ledger_mirror:LedgerMirrorTransport",
        '        event_name: "ledger_posted"',
    ]
    assert edited[closing + 1 : closing + 4] == ["", "# Inbox boxes.", "inbox:"]
    # The engine's own loader reads it: the old boxes as they were, the new ones complete.
    after = load_boxes(sources.boxes)
    assert list(after.outbox) == [*before.outbox, "ledger_outbox_item"]
    assert list(after.inbox) == [*before.inbox, "refund_note_inbox_item"]
    for name, box in before.outbox.items():
        assert after.outbox[name] == box
    ledger = after.outbox["ledger_outbox_item"]
    assert ledger.item_class == f"{PACKAGE}.items:LedgerOutboxItem"
    assert [(t.class_path, t.event_name) for t in ledger.transports] == [
        (f"{PACKAGE}.transports.ledger_outbox_item:LedgerEventsKafkaTransport", None),
        (f"{PACKAGE}.transports.ledger_mirror:LedgerMirrorTransport", "ledger_posted"),
    ]
    assert ledger.transports[0].args == {"topic": "ledgers"}
    refund = after.inbox["refund_note_inbox_item"]
    assert refund.topics == ("refund_notes",)
    assert [t.class_path for t in refund.transports] == [
        f"{PACKAGE}.transports.refund_note_inbox_item:RefundNoteLogHandler"
    ]
    assert [t.class_path for t in after.inbox[inbox_box].transports][-1] == (
        f"{PACKAGE}.transports.audit_trail:AuditTrailHandler"
    )


def test_an_existing_box_name_is_refused_and_nothing_changes(sources: ProjectFiles) -> None:
    before = tree(sources.root)
    config = load_boxes(sources.boxes)
    for kind, boxes in (("outbox", config.outbox), ("inbox", config.inbox)):
        existing = next(iter(boxes))
        with pytest.raises(OpsError, match=f"^box {existing} exists already in .*boxes.yaml$"):
            generate_item(sources, existing.removesuffix(f"_{kind}_item"), kind)
    assert tree(sources.root) == before
    # A box of that name in the other section is refused as well (names are global).
    document = boxes_edit.load(sources.boxes.read_text(), "boxes.yaml")
    inbox_box = next(iter(config.inbox))
    with pytest.raises(OpsError, match=f"^box {inbox_box} exists already"):
        boxes_edit.add_box(document, "outbox", f"{inbox_box}:\n  item_class: a.b:C\n")
    assert tree(sources.root) == before


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
    # Generated boxes index open items only by key (delivered_key_index = False).
    for table in ("audit_log_outbox_items", "audit_inbox_items"):
        assert key_indexes(fresh_database, table) == {
            f"ix_{table}_open_key_id": "(event_key, id) WHERE ((status = 0) OR (status = 1))"
        }

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
            # No probe server: the default ports may be taken by another run on this host.
            env=env_for(project, **settings, WORKER_PROBE_PORT="0", CONSUMER_PROBE_PORT="0"),
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


def key_indexes(database_url: str, table: str) -> dict[str, str]:
    """The (event_key, id) indexes of `table`: name -> columns and predicate."""
    dsn = database_url.replace("postgresql+asyncpg://", "postgresql://", 1)

    async def read() -> dict[str, str]:
        conn = await asyncpg.connect(dsn)
        try:
            rows = await conn.fetch(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = $1", table
            )
        finally:
            await conn.close()
        return {
            name: definition.split(" USING btree ", 1)[1]
            for name, definition in rows
            if "btree (event_key, id)" in definition and not name.endswith("_blocked")
        }

    return asyncio.run(read())


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
