"""`relay: debezium` in config/boxes.yaml: which boxes Debezium can relay, checked at start
with the key path named, and the connector configuration built for them."""

from __future__ import annotations

from typing import Any

import pytest

from outbox_engine import KafkaTransport
from outbox_engine.config.boxes import ConfigError, parse_boxes
from outbox_engine.config.registry import BoxRegistry
from outbox_engine.debezium.connector import DebeziumNames, connector_config
from outbox_engine.store.capture import HEADER_COLUMNS, heartbeat_sql
from outbox_engine.transports.base import ItemRecord

from ..support import INBOX_BOX, OUTBOX_BOX, boxes_yaml

NAMES = DebeziumNames.for_service("my-service", "my_service")


class RoutesByEvent(KafkaTransport):
    def topic_for(self, item: ItemRecord) -> str:
        return f"{self.topic}.{item.event_name}"


class SameTopic(KafkaTransport):
    def topic_for(self, item: ItemRecord) -> str:
        return self.topic


def _registry(**changes: Any) -> BoxRegistry:
    raw = boxes_yaml()
    raw["outbox"][OUTBOX_BOX].update({"relay": "debezium", **changes})
    return BoxRegistry(parse_boxes(raw, "boxes.yaml"))


def _error(**changes: Any) -> str:
    with pytest.raises(ConfigError) as info:
        _registry(**changes)
    return str(info.value)


def test_the_shipped_outbox_box_can_be_relayed_by_debezium() -> None:
    box = _registry().get(OUTBOX_BOX)
    assert box.relayed_by_debezium
    assert not BoxRegistry(parse_boxes(boxes_yaml(), "b")).get(OUTBOX_BOX).relayed_by_debezium


def test_relay_is_worker_or_debezium_and_outbox_only() -> None:
    assert "relay: Input should be 'worker' or 'debezium'" in _error(relay="connect")
    raw = boxes_yaml()
    raw["inbox"][INBOX_BOX]["relay"] = "debezium"
    with pytest.raises(ConfigError) as info:
        BoxRegistry(parse_boxes(raw, "boxes.yaml"))
    assert f"inbox.{INBOX_BOX}.relay: Extra inputs are not permitted" in str(info.value)


def _kafka(cls: str = "outbox_engine:KafkaTransport", **args: Any) -> dict[str, Any]:
    return {"class": cls, "args": {"topic": "orders", **args}}


def test_a_debezium_box_has_one_plain_kafka_transport() -> None:
    where = f"outbox.{OUTBOX_BOX}"
    two = _error(transports=[_kafka(), _kafka()])
    assert f"{where}.transports: a box relayed by Debezium has exactly one transport" in two
    log = _error(transports=[{"class": "outbox_engine:LogTransport"}])
    assert f"{where}.transports[0].class: Debezium sends to Kafka only" in log
    filtered = _error(transports=[{**_kafka(), "event_name": "order_created"}])
    assert f"{where}.transports[0].event_name: a box relayed by Debezium sends every event" in (
        filtered
    )
    unkeyed = _error(transports=[_kafka(key_from="none")])
    assert f"{where}.transports[0].args.key_from: Debezium keys by event_key" in unkeyed
    routed = _error(transports=[_kafka(f"{__name__}:RoutesByEvent")])
    assert "RoutesByEvent.topic_for sends" in routed
    assert "'orders." in routed
    # An override that returns the configured topic (the generated transports do) is fine.
    assert _registry(transports=[_kafka(f"{__name__}:SameTopic")]).get(OUTBOX_BOX)


def test_connector_config_maps_the_capture_columns_to_the_workers_message() -> None:
    config = connector_config(NAMES, "postgresql://u%40x:p%3Aw@db.example:6543/orders_db")
    assert (config["database.hostname"], config["database.port"]) == ("db.example", "6543")
    assert (config["database.user"], config["database.password"]) == ("u@x", "p:w")
    assert config["database.dbname"] == "orders_db"
    assert (config["slot.name"], config["publication.name"]) == ("my_service_outbox",) * 2
    assert config["publication.autocreate.mode"] == "disabled"
    assert config["snapshot.mode"] == "no_data"
    assert config["table.include.list"] == "public.outbox_capture"
    placement = config["transforms.outbox.table.fields.additional.placement"].split(",")
    headers = [entry.split(":")[2] for entry in placement]
    # The worker's order: ids and time first, then the JSON headers as jsonb orders them.
    assert headers == [
        "message-id",
        "event-name",
        "created-at",
        "hop",
        "tracestate",
        "traceparent",
        "causation-id",
        "correlation-id",
    ]
    assert sorted(headers[3:], key=lambda h: (len(h), h)) == headers[3:]
    assert [h for h, _ in HEADER_COLUMNS] == headers[3:]
    assert config["heartbeat.action.query"] == heartbeat_sql("my_service.outbox-heartbeat")
    assert config["predicates.beats.pattern"] == r"__debezium-heartbeat\.my_service"
    assert config["transforms"] == "beats,outbox,dropid"
    with pytest.raises(ConfigError, match="needs a host and a database"):
        connector_config(NAMES, "postgresql:///nohost")
