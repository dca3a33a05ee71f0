"""`generate item` and `generate transport`: new boxes and transports that work unedited.

The code comes from the scaffold templates in `src/<package>/scaffold/` (Jinja,
`scaffold.py`), the same files the project template rendered this project's first transport
modules, item classes and boxes from: one source. config/boxes.yaml is edited through a round-trip YAML parser
(`boxes_edit.py`), which keeps its comments and layout.

All files are computed and checked first and written last; nothing existing is ever
overwritten (an existing target is an error that names it).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from outbox_engine.config.boxes import ConfigError, parse_boxes

from . import boxes_edit
from .errors import OpsError
from .scaffold import ProjectFiles, camel, item_class, item_transport, render

NAME = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
MAX_NAME = 29  # keeps box names within 41 characters and index names within 63
EVENT = re.compile(r"^[^\x00-\x1f]{1,255}$")
REVISION = re.compile(r"^revision(?:\s*:[^=]*)?=\s*[\"']([^\"']+)[\"']", re.M)
DOWN_REVISION = re.compile(r"^down_revision(?:\s*:[^=]*)?=\s*(.+)$", re.M)


def _name(value: str, what: str) -> str:
    if not NAME.match(value) or len(value) > MAX_NAME:
        raise OpsError(
            f"{what} {value!r} must be snake_case (a-z, 0-9, single underscores), "
            f"start with a letter, at most {MAX_NAME} characters"
        )
    return value


def _boxes(project: ProjectFiles) -> dict[str, Any]:
    """The boxes file as plain data (for checks; edits go through `boxes_edit`)."""
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


def _box_defaults(raw: dict[str, Any], section: str) -> tuple[int, str]:
    for config in (raw.get(section) or {}).values():
        if isinstance(config, dict):
            return int(config.get("bucket_count", 16)), str(
                config.get("partition_strategy", "hash")
            )
    return 16, "hash"


def _import_names(source: str, names: tuple[str, ...]) -> str:
    """`source` with `names` imported from outbox_engine (added to its single-line
    `from outbox_engine import ...`, or as a line of their own after the last import)."""
    tree = ast.parse(source)
    imported = {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    missing = [n for n in names if n not in imported]
    if not missing:
        return source
    lines = source.splitlines(keepends=True)
    for node in tree.body:
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "outbox_engine"
            and node.lineno == node.end_lineno
            and all(a.asname is None for a in node.names)
        ):
            every = sorted({a.name for a in node.names} | set(missing))
            line = f"from outbox_engine import {', '.join(every)}\n"
            if len(line) <= 101:
                lines[node.lineno - 1] = line
                return "".join(lines)
    last = max(
        (n.end_lineno or n.lineno for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)),
        default=0,
    )
    lines.insert(last, f"from outbox_engine import {', '.join(sorted(missing))}\n")
    return "".join(lines)


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
    buckets, strategy = _box_defaults(raw, kind)
    transport_class, transport_source = item_transport(project, name, kind)
    entry = render(
        project.scaffold,
        "box.yaml.j2",
        box=box,
        kind=kind,
        package=project.package,
        item_class=cls,
        module=module,
        transport_class=transport_class,
        topic_env=f"{name.upper()}_EVENTS_TOPIC",  # ${ENV:-default}, overridable per deploy
        topic_default=f"{name}s",
        bucket_count=buckets,
        partition_strategy=strategy,
        settings="",
        event_name="",
    )
    document = boxes_edit.load(project.boxes.read_text(encoding="utf-8"), str(project.boxes))
    boxes_edit.add_box(document, kind, entry)
    boxes_text = boxes_edit.dump(document)
    _check_box(boxes_text, kind, box)
    mixin = "OutboxItemMixin" if kind == "outbox" else "InboxItemMixin"
    items_source = _import_names(items_source, ("EventTypes", mixin))
    items_source = items_source.rstrip("\n") + "\n\n\n" + item_class(project, name, kind)
    migration = render(
        project.scaffold,
        "migration.py.j2",
        name=name,
        kind=kind,
        revision=revision,
        down=down,
        table=table,
        inbox=str(kind == "inbox"),
    )
    new = {
        project.versions / f"{revision}_{table}.py": migration,
        project.transports / f"{module}.py": transport_source,
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
    text = project.boxes.read_text(encoding="utf-8")
    before = _check_box(text, section, box)
    if any(isinstance(t, dict) and t.get("class") == path for t in before.get("transports") or []):
        raise OpsError(f"{path} is already a transport of box {box}")
    entry: dict[str, Any] = {"class": path}
    if event:
        entry["event_name"] = DoubleQuotedScalarString(event)
    document = boxes_edit.load(text, str(project.boxes))
    boxes_edit.add_transport(document, section, box, entry)
    boxes_text = boxes_edit.dump(document)
    after = _check_box(boxes_text, section, box)
    transports = after.get("transports") or []
    if (
        len(transports) != len(before.get("transports") or []) + 1
        or transports[-1].get("class") != path
    ):
        raise OpsError("internal error: the transport entry did not land in the box's transports")
    if section == "outbox":
        source = render(project.scaffold, "transport.py.j2", name=name, box=box, cls=cls)
    else:
        source = render(
            project.scaffold,
            "inbox_handler.py.j2",
            title=f"The {name} handler of box {box}",
            cls=cls,
        )
    return _commit({project.transports / f"{name}.py": source}, {project.boxes: boxes_text})


__all__ = [
    "OpsError",
    "ProjectFiles",
    "generate_item",
    "generate_transport",
    "item_class",
    "item_transport",
]
