"""The Debezium relay's commands and operator rules without services: the service's names,
the connector JSON, the status line, the worker's disagreement warnings, the refusals of
retry/discard/park on a box Debezium relays, and the command-line errors (exit 2)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from {{ cookiecutter.package_name }} import cli
from {{ cookiecutter.package_name }}.debezium_names import debezium_names
from {{ cookiecutter.package_name }}.ops.debezium_output import config_document, status_line
from {{ cookiecutter.package_name }}.ops.stats import render
from {{ cookiecutter.package_name }}.settings import Settings
from outbox_engine.debezium.connector import connector_config
from outbox_engine.operations.errors import OpsError
from outbox_engine.operations.recapture import check_relay
from outbox_engine.operations.stats import BoxStats
from outbox_engine.relay.capture_upkeep import disagreement, split_by_relay

from ..support import INBOX_BOX, OUTBOX_BOX, make_registry

PROG = "{{ cookiecutter.project_slug }}"
PACKAGE = "{{ cookiecutter.package_name }}"
URL = "postgresql+asyncpg://app:s3cret@db.internal:6543/orders"


def settings(**values: Any) -> Settings:
    return Settings(database_url=URL, kafka_bootstrap_servers="k:9092", **values)


def test_the_service_names_its_connector_slot_publication_and_prefix() -> None:
    names = debezium_names(settings())
    assert (names.connector, names.slot, names.publication, names.topic_prefix) == (
        f"{PROG}-outbox",
        f"{PACKAGE}_outbox",
        f"{PACKAGE}_outbox",
        PACKAGE,
    )
    staging = debezium_names(settings(debezium_name_suffix="staging_2"))
    assert staging.connector == f"{PROG}-staging-2-outbox"
    assert staging.slot == staging.publication == f"{PACKAGE}_staging_2_outbox"
    assert staging.topic_prefix == f"{PACKAGE}_staging_2"


@pytest.mark.parametrize("suffix", ["Staging", "a-b", "x" * 21, "é"])
def test_a_suffix_that_is_no_slot_name_is_refused(suffix: str) -> None:
    with pytest.raises(ValueError, match="debezium_name_suffix"):
        settings(debezium_name_suffix=suffix)


def test_the_printed_document_is_the_engines_configuration() -> None:
    names = debezium_names(settings())
    document = config_document(names, URL)
    assert document == {"name": f"{PROG}-outbox", "config": connector_config(names, URL)}
    assert document["config"]["slot.name"] == f"{PACKAGE}_outbox"
    assert document["config"]["database.hostname"] == "db.internal"
    assert document["config"]["database.port"] == "6543"


def _found(**changes: object) -> dict[str, object]:
    found: dict[str, object] = {
        "box": "b",
        "relay": "debezium",
        "trigger": True,
        "topic": "orders",
        "pending": 0,
        "capture_rows": 7,
        "slot": {"exists": True, "active": True, "lag_bytes": 120},
        "problems": [],
    }
    found.update(changes)
    return found


def test_status_lines_say_what_is_there_and_what_is_wrong() -> None:
    assert status_line(_found(), "s") == (
        "b\trelay debezium\ttrigger -> orders\tslot s active, lag 120 bytes\t"
        "7 capture rows\t0 pending\tok"
    )
    missing = status_line(
        _found(trigger=False, slot={"exists": False}, pending=3, problems=["one", "two"]), "s"
    )
    assert "\tno trigger\tslot s missing\t" in missing
    assert missing.endswith("\t3 pending\tone; two")


def test_the_worker_warns_when_config_and_trigger_disagree() -> None:
    worker_box = make_registry().get(OUTBOX_BOX)
    debezium_box = make_registry(outbox={"relay": "debezium"}).get(OUTBOX_BOX)
    assert disagreement(worker_box, None) is None
    assert disagreement(debezium_box, "orders") is None
    missing = disagreement(debezium_box, None)
    assert missing is not None
    assert "has no capture trigger" in missing
    assert f"debezium-switch {OUTBOX_BOX} --to debezium" in missing
    stray = disagreement(worker_box, "orders")
    assert stray is not None
    assert "says relay: worker" in stray


def test_the_worker_splits_its_boxes_by_relay() -> None:
    registry = make_registry(outbox={"relay": "debezium"})
    relayed, debezium = split_by_relay(list(registry))
    assert [b.name for b in relayed] == [INBOX_BOX]
    assert [b.name for b in debezium] == [OUTBOX_BOX]


@pytest.mark.parametrize("action", ["retry", "discard", "park"])
def test_retry_discard_and_park_are_refused_on_a_debezium_box(action: str) -> None:
    box = make_registry(outbox={"relay": "debezium"}).get(OUTBOX_BOX)
    with pytest.raises(OpsError, match=f"relayed by Debezium .* so {action} applies to none"):
        check_relay(box, action)  # type: ignore[arg-type]
    check_relay(box, "replay")
    check_relay(make_registry().get(OUTBOX_BOX), action)  # type: ignore[arg-type]


def _stats(capture: dict[str, object], pending: int = 0) -> BoxStats:
    counts = {"pending": pending, "failed": 0, "delivered": 9, "discarded": 0, "parked": 0}
    return BoxStats("b", "outbox", "t", counts, pending, 0, None, relay="debezium", capture=capture)


def test_stats_show_the_capture_instead_of_the_workers_figures() -> None:
    capture = {
        "trigger": True,
        "topic": "orders",
        "slot": "s",
        "slot_exists": True,
        "slot_active": False,
        "lag_bytes": 4096,
        "capture_rows": 3,
        "problems": ["captured, but slot s is not streaming"],
    }
    text = render([_stats(capture)])
    assert text.splitlines() == [
        "outbox b (t, relay debezium)",
        "  pending 0  failed 0  delivered 9  discarded 0  parked 0",
        "  debezium: capture trigger to topic orders; slot s NOT streaming, 4096 bytes behind; "
        "3 capture rows",
        "  PROBLEM: captured, but slot s is not streaming",
    ]
    assert "due" not in text
    assert "deepest" not in text
    gone = render([_stats({**capture, "trigger": False, "slot_exists": False}, pending=2)])
    assert "NO capture trigger; slot s MISSING" in gone
    assert "  pending: 2 (nothing relays them without the trigger)" in gone


@pytest.fixture
def service_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("DATABASE_URL", URL)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "k:9092")
    monkeypatch.delenv("CONNECT_URL", raising=False)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers  # main configures the root logger: leave it as found
    root.setLevel(level)


def test_debezium_config_prints_the_json(
    service_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "postgresql://connect:pw@pg.example:5433/shop"
    assert cli.main(["debezium-config", "--database-url", url]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == config_document(debezium_names(settings()), url)


def test_register_without_a_connect_url_exits_2(
    service_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["debezium-config", "--register"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"{PROG}: --register needs Kafka Connect's URL: --connect-url or CONNECT_URL"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["debezium-switch", OUTBOX_BOX, "--to", "sideways"], "'sideways' is not one of"),
        (["debezium-switch", OUTBOX_BOX], "Missing option '--to'"),
        (["debezium-switch", "--to", "worker"], "Missing argument 'BOX'"),
        (["debezium-config", "--timeout", "0"], "Invalid value for '--timeout'"),
    ],
)
def test_bad_command_lines_exit_2(
    service_env: None, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert cli.main(argv) == 2
    assert message in " ".join(capsys.readouterr().err.split())
