"""`generate item` and `generate transport`: new boxes and transports that work unedited.

All files are computed and checked first and written last; nothing existing is ever
overwritten (an existing target is an error that names it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from outbox_engine.config.boxes import ConfigError, parse_boxes

from .errors import OpsError
from .yaml_text import add_to_section, add_transport

PACKAGE = __name__.split(".")[0]
DEFAULT_ROOT = Path(__file__).resolve().parents[3]
NAME = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
MAX_NAME = 29  # keeps box names within 41 characters and index names within 63
EVENT = re.compile(r"^[^\x00-\x1f]{1,255}$")
REVISION = re.compile(r"^revision(?:\s*:[^=]*)?=\s*[\"']([^\"']+)[\"']", re.M)
DOWN_REVISION = re.compile(r"^down_revision(?:\s*:[^=]*)?=\s*(.+)$", re.M)


@dataclass(frozen=True)
class ProjectFiles:
    root: Path
    package: str = PACKAGE

    @classmethod
    def find(cls, root: str | Path | None = None) -> ProjectFiles:
        project = cls(Path(root).resolve() if root else DEFAULT_ROOT)
        missing = [
            str(p.relative_to(project.root))
            for p in (project.items, project.boxes, project.versions, project.transports)
            if not p.exists()
        ]
        if missing:
            raise OpsError(
                f"{project.root} is not this service's source tree (missing {', '.join(missing)});"
                " run generate from a source checkout (editable install) or pass --root"
            )
        return project

    @property
    def package_dir(self) -> Path:
        return self.root / "src" / self.package

    @property
    def items(self) -> Path:
        return self.package_dir / "items.py"

    @property
    def transports(self) -> Path:
        return self.package_dir / "transports"

    @property
    def boxes(self) -> Path:
        return self.root / "config" / "boxes.yaml"

    @property
    def versions(self) -> Path:
        return self.root / "migrations" / "versions"


def _name(value: str, what: str) -> str:
    if not NAME.match(value) or len(value) > MAX_NAME:
        raise OpsError(
            f"{what} {value!r} must be snake_case (a-z, 0-9, single underscores), "
            f"start with a letter, at most {MAX_NAME} characters"
        )
    return value


def camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _fill(template: str, **values: str) -> str:
    for key, value in values.items():
        template = template.replace(f"<<{key}>>", value)
    return template


def _boxes(project: ProjectFiles) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(project.boxes.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise OpsError(f"{project.boxes}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise OpsError(f"{project.boxes}: the top level must be a mapping")
    return raw


def _check_box(text: str, section: str, box: str) -> dict[str, Any]:
    """The new boxes file must parse and the box must validate on its own."""
    raw = yaml.safe_load(text)
    config = (raw or {}).get(section, {}).get(box)
    if config is None:
        raise OpsError(f"internal error: box {box} missing after editing the boxes file")
    try:
        parse_boxes({section: {box: config}}, "generated box")
    except ConfigError as exc:
        raise OpsError(f"the generated configuration is invalid: {exc}") from None
    assert isinstance(config, dict)
    return config


def _head_revision(versions: Path) -> tuple[str, str]:
    """The single alembic head, and the id for a revision after it."""
    revisions: dict[str, set[str]] = {}
    for path in sorted(versions.glob("*.py")):
        source = path.read_text(encoding="utf-8")
        found = REVISION.search(source)
        if not found:
            continue
        down = DOWN_REVISION.search(source)
        revisions[found.group(1)] = set(
            re.findall(r"[\"']([^\"']+)[\"']", down.group(1) if down else "")
        )
    referenced = set().union(*revisions.values()) if revisions else set()
    heads = sorted(set(revisions) - referenced)
    if len(heads) != 1:
        raise OpsError(
            f"migrations/versions has {len(heads)} heads ({', '.join(heads)}); merge them first"
        )
    numbers = [int(r) for r in revisions if r.isdigit()]
    next_id = f"{max(numbers, default=0) + 1:04d}"
    if next_id in revisions:
        raise OpsError(f"revision {next_id} exists already")
    return heads[0], next_id


def _write_new(files: dict[Path, str]) -> None:
    for path in files:
        if path.exists():
            raise OpsError(f"{path} exists already; generate never overwrites")


def _commit(new: dict[Path, str], changed: dict[Path, str]) -> list[Path]:
    _write_new(new)
    for path, content in new.items():
        with path.open("x", encoding="utf-8") as handle:
            handle.write(content)
    for path, content in changed.items():
        path.write_text(content, encoding="utf-8")
    return [*new, *changed]


ITEM_MIGRATION = '''"""The <<name>> <<kind>> box's table (generated by `generate item`).

Revision ID: <<revision>>
Revises: <<down>>
"""

from collections.abc import Sequence

from alembic import op

from <<package>>outbox_engine.store.schema import create_item_table

revision: str = "<<revision>>"
down_revision: str | None = "<<down>>"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    create_item_table("<<table>>", inbox=<<inbox>>)


def downgrade() -> None:
    op.drop_table("<<table>>")
'''

OUTBOX_TRANSPORT = '''"""Transports of the <<name>> outbox box (user-editable)."""

from __future__ import annotations

from outbox_engine.transports.builtin import KafkaTransport
from outbox_engine.transports.base import ItemRecord


class <<camel>>EventsKafkaTransport(KafkaTransport):
    """Relays <<name>> events to Kafka: key = event key, value = payload.

    Override `topic_for` to route by event, or subclass `Transport` for another destination.
    """

    def topic_for(self, item: ItemRecord) -> str:
        return self.topic
'''

LOG_HANDLER = '''"""<<title>> (user-editable).

A handler runs inside the transaction that marks its item delivered: write through the
given session and your changes commit exactly when the item does.
"""

from __future__ import annotations

import logging

from sqlalchemy.ext.asyncio import AsyncSession

from outbox_engine.transports.base import InboxHandler, ItemRecord

log = logging.getLogger(__name__)


class <<cls>>(InboxHandler):
    """A working default: logs each message. Replace the body with your business logic."""

    async def handle(self, item: ItemRecord, payload: bytes, session: AsyncSession) -> bool:
        log.info(
            "received %s key=%s (%d bytes)",
            item.event_name,
            item.event_key,
            len(payload),
            extra={"box": item.box, "item_id": item.id, "message_id": str(item.uuid)},
        )
        return True
'''

LOG_TRANSPORT = '''"""The <<name>> transport of box <<box>> (user-editable)."""

from __future__ import annotations

import logging

from outbox_engine.transports.base import ItemRecord, Transport

log = logging.getLogger(__name__)


class <<cls>>(Transport):
    """A working default that logs each item; replace the body with the delivery.

    Return True (or None) once delivered; return False or raise to retry later; raise
    `PermanentFailure` (outbox_engine.transports.base) when retrying cannot help.
    """

    async def __call__(self, item: ItemRecord, payload: bytes) -> bool:
        log.info(
            "%s %s key=%s (%d bytes)",
            item.box,
            item.event_name,
            item.event_key,
            len(payload),
            extra={"box": item.box, "item_id": item.id, "message_id": str(item.uuid)},
        )
        return True
'''


def _box_defaults(raw: dict[str, Any], section: str) -> tuple[int, str]:
    for config in (raw.get(section) or {}).values():
        if isinstance(config, dict):
            return int(config.get("bucket_count", 16)), str(
                config.get("partition_strategy", "hash")
            )
    return 16, "hash"


def generate_item(project: ProjectFiles, name: str, kind: str) -> list[Path]:
    """Model, migration, box configuration and a working transport for a new box."""
    _name(name, "item name")
    if kind not in ("outbox", "inbox"):
        raise OpsError("--kind must be outbox or inbox")
    box, table, cls = (
        f"{name}_{kind}_item",
        f"{name}_{kind}_items",
        f"{camel(name)}{kind.capitalize()}Item",
    )
    raw = _boxes(project)
    for section in ("outbox", "inbox"):
        if box in (raw.get(section) or {}):
            raise OpsError(f"box {box} exists already in {project.boxes}")
    items_source = project.items.read_text(encoding="utf-8")
    if re.search(rf"^class {cls}\b", items_source, re.M) or f'"{table}"' in items_source:
        raise OpsError(f"{project.items} already defines {cls} or table {table}")
    down, revision = _head_revision(project.versions)
    module = f"{name}_{kind}_item"
    transport_file = project.transports / f"{module}.py"
    topic_env = f"{name.upper()}_EVENTS_TOPIC"
    topic = '"${' + topic_env + ":-" + name + 's}"'  # ${ENV:-default}, overridable per deploy
    buckets, strategy = _box_defaults(raw, kind)
    if kind == "outbox":
        transport_class = f"{camel(name)}EventsKafkaTransport"
        transport_source = _fill(OUTBOX_TRANSPORT, name=name, camel=camel(name))
        specific = [
            "    transports:\n",
            f"      - class: {project.package}.transports.{module}:{transport_class}\n",
            "        args:\n",
            f"          topic: {topic}\n",
        ]
    else:
        transport_class = f"{camel(name)}LogHandler"
        transport_source = _fill(
            LOG_HANDLER, title=f"Handlers of the {name} inbox box", cls=transport_class
        )
        specific = [
            f"    topics: [{topic}]\n",
            "    transports:\n",
            f"      - class: {project.package}.transports.{module}:{transport_class}\n",
        ]
    block = "".join(
        [
            f"  {box}:\n",
            f"    item_class: {project.package}.items:{cls}\n",
            f"    bucket_count: {buckets}\n",
            f"    partition_strategy: {strategy}\n",
            *specific,
        ]
    )
    boxes_text = add_to_section(project.boxes.read_text(encoding="utf-8"), kind, block)
    _check_box(boxes_text, kind, box)
    mixin = "OutboxItemMixin" if kind == "outbox" else "InboxItemMixin"
    if not re.search(rf"^from \S+ import .*\b{mixin}\b", items_source, re.M):
        items_source = items_source.replace(
            "\n\n\nclass ", f"\nfrom outbox_engine.store.models import {mixin}\n\n\nclass ", 1
        )
    items_source = (
        items_source.rstrip("\n")
        + f'\n\n\nclass {cls}({mixin}, Base):\n    __tablename__ = "{table}"\n'
    )
    migration = _fill(
        ITEM_MIGRATION,
        name=name,
        kind=kind,
        revision=revision,
        down=down,
        package=project.package,
        table=table,
        inbox=str(kind == "inbox"),
    )
    new = {
        project.versions / f"{revision}_{table}.py": migration,
        transport_file: transport_source,
    }
    return _commit(new, {project.items: items_source, project.boxes: boxes_text})


def generate_transport(
    project: ProjectFiles, box: str, name: str, event: str | None = None
) -> list[Path]:
    """A transport class (logging, working) and its entry in the box's transports."""
    _name(name, "transport name")
    if event is not None and not EVENT.match(event):
        raise OpsError("--event must be 1-255 printable characters")
    raw = _boxes(project)
    section = next((s for s in ("outbox", "inbox") if box in (raw.get(s) or {})), None)
    if section is None:
        known = [n for s in ("outbox", "inbox") for n in (raw.get(s) or {})]
        raise OpsError(f"unknown box {box!r}; configured boxes: {', '.join(known) or 'none'}")
    cls = f"{camel(name)}{'Transport' if section == 'outbox' else 'Handler'}"
    path = f"{project.package}.transports.{name}:{cls}"
    _write_new({project.transports / f"{name}.py": ""})
    entry = [f"class: {path}"] + ([f"event_name: {json.dumps(event)}"] if event else [])
    before = _check_box(project.boxes.read_text(encoding="utf-8"), section, box)
    if any(isinstance(t, dict) and t.get("class") == path for t in before.get("transports") or []):
        raise OpsError(f"{path} is already a transport of box {box}")
    boxes_text = add_transport(project.boxes.read_text(encoding="utf-8"), section, box, entry)
    after = _check_box(boxes_text, section, box)
    transports = after.get("transports") or []
    if (
        len(transports) != len(before.get("transports") or []) + 1
        or transports[-1].get("class") != path
    ):
        raise OpsError("internal error: the transport entry did not land in the box's transports")
    if section == "outbox":
        source = _fill(LOG_TRANSPORT, name=name, box=box, cls=cls)
    else:
        source = _fill(LOG_HANDLER, title=f"The {name} handler of box {box}", cls=cls)
    return _commit({project.transports / f"{name}.py": source}, {project.boxes: boxes_text})
