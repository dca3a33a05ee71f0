"""`{{ cookiecutter.project_slug }} asyncapi` as a process: writes the document, and --check
exits 0, 1 or 2 with each change listed; it reads only the boxes file (no database, no Kafka)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

from ..ops_support import run_cli
from ..support import PROJECT_ROOT

# No DATABASE_URL nor KAFKA_BOOTSTRAP_SERVERS: the command must not need them.
ENV = {
    k: v
    for k, v in os.environ.items()
    if k not in ("DATABASE_URL", "KAFKA_BOOTSTRAP_SERVERS") and not k.endswith("_EVENTS_TOPIC")
}


def published() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((PROJECT_ROOT / "contracts" / "asyncapi.json").read_text())
    return loaded


def test_the_command_writes_the_published_document(tmp_path: Path) -> None:
    target = tmp_path / "out" / "asyncapi.json"
    result = run_cli("asyncapi", "--output", str(target), env=ENV)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"wrote {target}: 2 channels, 2 operations")
    assert json.loads(target.read_text()) == published()
    printed = run_cli("asyncapi", "--output", "-", env=ENV)
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout) == published()


def test_check_passes_the_repository_document() -> None:
    result = run_cli("asyncapi", "--check", env=ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("no changes against ")


def test_check_fails_on_a_removed_topic_and_passes_an_added_one(tmp_path: Path) -> None:
    document = published()
    wider = copy.deepcopy(document)  # published with one more topic: the code removed it
    name, operation = next(iter(wider["operations"].items()))
    wider["channels"]["retired"] = {"address": "retired", "messages": {}}
    wider["operations"][f"{name}.retired"] = {
        **operation,
        "channel": {"$ref": "#/channels/retired"},
        "messages": [],
    }
    (tmp_path / "wider.json").write_text(json.dumps(wider))
    result = run_cli("asyncapi", "--check", "--output", str(tmp_path / "wider.json"), env=ENV)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        f"BREAKING: {operation['action']} retired: channel removed (no longer "
        f"{'sent' if operation['action'] == 'send' else 'received'})"
    ]
    assert "1 breaking change(s)" in result.stderr

    narrower = copy.deepcopy(document)  # published without a topic: the code added it
    del narrower["operations"][name]
    (tmp_path / "narrower.json").write_text(json.dumps(narrower))
    result = run_cli("asyncapi", "--check", "--output", str(tmp_path / "narrower.json"), env=ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[0].startswith(f"compatible: {operation['action']} ")
    assert result.stdout.splitlines()[0].endswith(": channel added")


def test_check_without_a_published_document_exits_2(tmp_path: Path) -> None:
    result = run_cli("asyncapi", "--check", "--output", str(tmp_path / "none.json"), env=ENV)
    assert result.returncode == 2
    assert "no published document at" in result.stderr
