"""The published AsyncAPI document (contracts/asyncapi.json): writing it and checking it.

`<service> asyncapi` writes the document built from `config/boxes.yaml` with each
`${VAR:-default}` at its default, so that the document and its check do not depend on the
environment they run in. `--check` compares the published document with the current one
(contracts/check.py) and fails on a change that would break a consumer or a producer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from outbox_engine.config.boxes import ENV_REFERENCE, ConfigError, parse_boxes
from outbox_engine.config.registry import BoxRegistry
from outbox_engine.contracts.asyncapi import ServiceInfo, build_document
from outbox_engine.contracts.check import compare

PROJECT_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_BOXES_FILE = PROJECT_ROOT / "config" / "boxes.yaml"
PUBLISHED = PROJECT_ROOT / "contracts" / "asyncapi.json"


def load_registry(boxes_file: Path = DEFAULT_BOXES_FILE) -> BoxRegistry:
    """The boxes of `boxes_file` with every `${VAR:-default}` at its default (a `${VAR}`
    without one still comes from the environment)."""
    try:
        raw = yaml.safe_load(boxes_file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read box configuration {boxes_file}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{boxes_file}: not valid YAML: {exc}") from None
    return BoxRegistry(parse_boxes(_defaults(raw), str(boxes_file)))


def _defaults(value: Any) -> Any:
    if isinstance(value, str):
        return ENV_REFERENCE.sub(
            lambda m: m.group(2) if m.group(2) is not None else m.group(0), value
        )
    if isinstance(value, dict):
        return {k: _defaults(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_defaults(v) for v in value]
    return value


def render(document: dict[str, Any]) -> str:
    """The document as the published file holds it: indented JSON, one final newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def main(
    service: ServiceInfo,
    output: Path | None = None,
    check: bool = False,
    boxes_file: Path = DEFAULT_BOXES_FILE,
) -> int:
    """`asyncapi [--output F] [--check]`: write the document to F (default
    contracts/asyncapi.json; `-` is standard output), or with --check compare the document
    published at F with the current one and list the changes. Exit 0: written, or no
    breaking change; 1: breaking changes; 2: no published document or a bad configuration."""
    target = output or PUBLISHED
    try:
        document = build_document(load_registry(boxes_file), service)
    except ConfigError as exc:
        print(f"asyncapi: {exc}", file=sys.stderr)
        return 2
    if check:
        return _check(target, document)
    if str(target) == "-":
        sys.stdout.write(render(document))
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render(document), encoding="utf-8")
    print(
        f"wrote {target}: {len(document['channels'])} channels, "
        f"{len(document['operations'])} operations, "
        f"{len(document['components']['messages'])} messages"
    )
    return 0


def _check(published_file: Path, document: dict[str, Any]) -> int:
    try:
        published = json.loads(published_file.read_text(encoding="utf-8"))
    except OSError as exc:
        print(
            f"asyncapi --check: no published document at {published_file} ({exc.strerror}); "
            "write it with `asyncapi` and commit it",
            file=sys.stderr,
        )
        return 2
    except ValueError as exc:
        print(f"asyncapi --check: {published_file} is not JSON: {exc}", file=sys.stderr)
        return 2
    changes = compare(published, document)
    for change in changes:
        print(change)
    breaking = sum(change.breaking for change in changes)
    if breaking:
        print(
            f"{breaking} breaking change(s) against {published_file}: consumers or producers "
            "of these events would break (see docs/contracts.md)",
            file=sys.stderr,
        )
        return 1
    if changes:
        print(f"{len(changes)} compatible change(s); publish them with `asyncapi`")
    else:
        print(f"no changes against {published_file}")
    return 0
