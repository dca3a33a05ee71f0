from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from outbox_engine.config.boxes import ConfigError, load_boxes, parse_boxes
from outbox_engine.config.registry import BoxRegistry

from ..support import INBOX_BOX, OUTBOX_BOX, boxes_yaml, make_registry


def test_the_shipped_configuration_loads() -> None:
    registry = make_registry()
    assert registry.names() == [OUTBOX_BOX, INBOX_BOX]
    outbox = registry.get(OUTBOX_BOX)
    assert outbox.kind == "outbox"
    assert outbox.config.bucket_count == {{ cookiecutter.bucket_count }}
    assert outbox.config.partition_strategy == "{{ cookiecutter.partition_strategy }}"
    assert outbox.table_name == "{{ cookiecutter.outbox_item }}_outbox_items"
    assert registry.get(INBOX_BOX).inbox_config.topics == ("{{ cookiecutter.inbox_item }}s",)


def test_environment_overrides_topics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("{{ cookiecutter.inbox_item.upper() }}_EVENTS_TOPIC", "elsewhere")
    assert make_registry().get(INBOX_BOX).inbox_config.topics == ("elsewhere",)


def _error(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        BoxRegistry(parse_boxes(raw, "boxes.yaml"))
    return str(info.value)


def test_errors_name_the_key() -> None:
    raw = boxes_yaml()
    raw["outbox"][OUTBOX_BOX]["bucket_count"] = 0
    assert (
        f"boxes.yaml: outbox.{OUTBOX_BOX}.bucket_count: Input should be greater than or equal to 1"
        in _error(raw)
    )


def test_unknown_keys_are_rejected() -> None:
    raw = boxes_yaml()
    raw["outbox"][OUTBOX_BOX]["bucket_size"] = 16
    assert f"outbox.{OUTBOX_BOX}.bucket_size: Extra inputs are not permitted" in _error(raw)


def test_strict_order_with_latest_available_is_rejected() -> None:
    raw = boxes_yaml()
    raw["outbox"][OUTBOX_BOX].update(strict_order=True, retry_strategies=["latest_available"])
    assert "latest_available needs `strict_order: false`" in _error(raw)


def test_poisoned_head_is_block_or_park() -> None:
    raw = boxes_yaml()
    del raw["outbox"][OUTBOX_BOX]["poisoned_head"]
    assert BoxRegistry(parse_boxes(raw, "boxes.yaml")).get(OUTBOX_BOX).config.poisoned_head == (
        "block"
    )
    raw["outbox"][OUTBOX_BOX]["poisoned_head"] = "park"
    assert BoxRegistry(parse_boxes(raw, "boxes.yaml")).get(OUTBOX_BOX).config.poisoned_head == (
        "park"
    )
    raw["outbox"][OUTBOX_BOX]["poisoned_head"] = "drop"
    assert f"outbox.{OUTBOX_BOX}.poisoned_head: Input should be 'block' or 'park'" in _error(raw)


def test_transport_classes_are_checked() -> None:
    raw = boxes_yaml()
    raw["outbox"][OUTBOX_BOX]["transports"] = [{"class": "json:JSONDecoder"}]
    assert (
        f"outbox.{OUTBOX_BOX}.transports[0].class: json:JSONDecoder is not a Transport"
        in _error(raw)
    )
    raw["outbox"][OUTBOX_BOX]["transports"] = [{"class": "no.such.module:X"}]
    assert "cannot import module 'no.such.module'" in _error(raw)


def test_bad_transport_arguments_name_the_transport() -> None:
    raw = boxes_yaml()
    raw["outbox"][OUTBOX_BOX]["transports"][0]["args"] = {"topik": "x"}
    assert f"outbox.{OUTBOX_BOX}.transports[0].args:" in _error(raw)


def test_missing_environment_variable_without_default() -> None:
    raw = boxes_yaml()
    raw["outbox"][OUTBOX_BOX]["transports"][0]["args"] = {"topic": "${NO_SUCH_VARIABLE_HERE}"}
    assert "environment variable NO_SUCH_VARIABLE_HERE is not set" in _error(raw)


def test_durations_accept_iso_8601_and_seconds() -> None:
    raw = boxes_yaml()
    raw["outbox"][OUTBOX_BOX]["retention"] = {"delivered": "PT6H", "failed": 3600}
    config = parse_boxes(raw).outbox[OUTBOX_BOX].retention
    assert config.delivered.total_seconds() == 6 * 3600
    assert config.failed.total_seconds() == 3600


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read box configuration"):
        load_boxes(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("outbox: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_boxes(broken)
