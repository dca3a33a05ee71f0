"""docs/debezium.md matches the code: every command and option it tells an operator to run
exists in the console script, every engine name and path it gives exists, the connector
configuration it lists is exactly what `debezium-config` prints (every key, and every value
that does not come from DATABASE_URL), and the names it uses for the capture table's
columns, the trigger, the slot, the connector and the headers are the code's.

A doc that drifts from the code sends an operator to a flag that is not there in the middle
of a switch or an outage; these tests fail first."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from {{ cookiecutter.package_name }}.cli import app
from {{ cookiecutter.package_name }}.debezium_names import PACKAGE, SLUG
from outbox_engine.debezium.connector import DebeziumNames, connector_config
from outbox_engine.store import capture

from .test_architecture_doc import unresolved

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DOC = PROJECT_ROOT / "docs" / "debezium.md"
PROG = "{{ cookiecutter.project_slug }}"
URL = "postgresql+asyncpg://app:s3cret@db.internal:6543/orders"
# The names of a deployment without DEBEZIUM_NAME_SUFFIX, the ones the doc shows.
NAMES = DebeziumNames.for_service(SLUG, PACKAGE)

DOTTED = re.compile(r"`(outbox_engine(?:\.\w+)+)(?:\(\))?`")
PATH = re.compile(r"`((?:src|migrations|deploy)/[\w/.]+)`")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z-]*)")
SPAN = re.compile(r"`([^`\n]+)`")


def text() -> str:
    return DOC.read_text()


def section(title: str) -> str:
    return text().split(f"\n{title}\n", 1)[1].split("\n## ", 1)[0]


def commands() -> dict[str, Any]:
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    return dict(group.commands)


def options(command: Any) -> set[str]:
    return {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}


def invocations() -> list[tuple[str, list[str]]]:
    """Every `<prog> COMMAND ...` the doc shows, in code blocks or inline, with its options
    (a command continued on the next line with a backslash is one invocation)."""
    body = text().replace("\\\n", " ")
    found = []
    for line in body.splitlines():
        for span in SPAN.findall(line) if "`" in line else [line]:
            bare = re.fullmatch(r"(debezium-(?:config|switch|status))((?: [^`]*)?)", span)
            if bare:  # a command named without the program in prose
                found.append((bare.group(1), FLAG.findall(bare.group(2))))
            for match in re.finditer(rf"(?<![\w-]){re.escape(PROG)} ([a-z][a-z-]*)([^`]*)", span):
                rest = match.group(2).split("#", 1)[0]
                rest = re.split(rf"(?<![\w-]){re.escape(PROG)} ", rest, maxsplit=1)[0]
                found.append((match.group(1), FLAG.findall(rest)))
    return found


def test_every_command_and_option_the_doc_runs_exists() -> None:
    known = commands()
    shown = invocations()
    named = {name for name, _ in shown}
    assert {"debezium-config", "debezium-switch", "debezium-status", "replay"} <= named, named
    problems = []
    for name, flags in shown:
        if name not in known:
            problems.append(f"{PROG} {name}: no such command")
            continue
        missing = [flag for flag in flags if flag not in options(known[name])]
        if missing:
            problems.append(f"{PROG} {name}: no option {missing}")
    assert problems == []
    # Options named on their own (`--yes`, `--timeout`) belong to a command the doc shows.
    alone = {
        flag
        for span in SPAN.findall(text())
        if span.startswith("--") and " " not in span
        for flag in FLAG.findall(span)
    }
    assert {"--register", "--yes", "--timeout", "--connect-url"} <= alone, alone
    offered = set().union(*(options(known[name]) for name in named if name in known))
    assert sorted(alone - offered) == []


def test_the_switch_commands_name_both_directions() -> None:
    # Every switch the doc runs says where to (the prose also names the bare command).
    switches = [flags for name, flags in invocations() if name == "debezium-switch" and flags]
    assert len(switches) >= 3
    assert all("--to" in flags for flags in switches)
    assert "debezium-switch {{ cookiecutter.outbox_item }}_outbox_item --to debezium" in text()
    assert "debezium-switch {{ cookiecutter.outbox_item }}_outbox_item --to worker" in text()


def test_every_engine_name_and_path_exists() -> None:
    names = sorted(set(DOTTED.findall(text())))
    assert len(names) >= 15, names
    assert unresolved(names) == []
    paths = sorted(set(PATH.findall(text())))
    assert len(paths) >= 3, paths
    assert [p for p in paths if not (PROJECT_ROOT / p).exists()] == []


def listed_config() -> dict[str, str]:
    """The table of `### The connector's configuration`: key -> value cell."""
    table = text().split("\n### The connector's configuration\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 3 and cells[0].startswith("`"):
            key = cells[0].strip("`")
            assert key not in rows, f"{key} listed twice"
            rows[key] = cells[1].replace("\\|", "|")
    return rows


def test_the_connector_keys_listed_are_exactly_the_generated_ones() -> None:
    generated = connector_config(NAMES, URL)
    listed = listed_config()
    assert len(listed) >= 30
    assert sorted(set(listed) - set(generated)) == [], "listed but not generated"
    assert sorted(set(generated) - set(listed)) == [], "generated but not listed"


def test_every_literal_value_listed_is_the_generated_one() -> None:
    generated = connector_config(NAMES, URL)
    literal = {
        key: cell[1:-1] for key, cell in listed_config().items() if re.fullmatch(r"`[^`]+`", cell)
    }
    from_url = {key for key in listed_config() if key not in literal}
    # Only what comes from DATABASE_URL is described rather than given.
    assert from_url == {
        "database.hostname",
        "database.port",
        "database.user",
        "database.password",
        "database.dbname",
    }
    assert {key: generated[key] for key in literal} == literal
    assert (generated["database.hostname"], generated["database.port"]) == ("db.internal", "6543")
    assert (generated["database.user"], generated["database.dbname"]) == ("app", "orders")


def test_capture_columns_trigger_and_names_are_the_code_s() -> None:
    how = section("## How it works")
    spans = set(SPAN.findall(how))
    columns = [c.name for c in capture.capture_table.columns if c.name != "id"]
    assert [c for c in columns if c not in spans] == []
    assert capture.CAPTURE_TABLE in spans
    assert capture.HEARTBEAT_BOX in spans
    assert NAMES.heartbeat_topic in spans
    assert capture.TRIGGER in spans
    assert f"{capture.FUNCTION}()" in spans
    assert NAMES.slot in spans
    assert NAMES.publication in spans
    assert NAMES.connector in spans
    assert NAMES.topic_prefix in spans


def test_the_header_order_is_the_connector_s() -> None:
    row = next(
        line for line in section("## The message").splitlines() if "headers, in this order" in line
    )
    placement = connector_config(NAMES, URL)["transforms.outbox.table.fields.additional.placement"]
    assert SPAN.findall(row) == [entry.split(":header:")[1] for entry in placement.split(",")]


def test_the_slot_alert_is_named_where_the_bake_has_it() -> None:
    """With OpenTelemetry the doc names the slot alert and its gauge, which the alert rules
    and the metrics must have; without it the bake has neither and the doc names none."""
    alerts = PROJECT_ROOT / "deploy" / "otel" / "alerts.yaml"
    if not alerts.exists():
        assert "OutboxDebeziumSlotLag" not in text()
        return
    assert "alert: OutboxDebeziumSlotLag" in alerts.read_text()
    assert "outbox_debezium_lag_bytes" in alerts.read_text()
    assert "`OutboxDebeziumSlotLag`" in text()
    assert "`outbox_debezium_lag_bytes`" in text()
