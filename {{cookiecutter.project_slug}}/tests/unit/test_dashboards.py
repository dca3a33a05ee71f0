"""The provisioned dashboard and alert rules query metrics the service really exports."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path

import yaml

from {{ cookiecutter.package_name }}.settings import Settings
from {{ cookiecutter.package_name }}.telemetry import OtelObserver, configure, render_metrics
from outbox_engine.transports.base import ItemRecord

from ..support import INBOX_BOX, OUTBOX_BOX, make_registry

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "otel"
METRIC = re.compile(r"\b((?:outbox|inbox)_[a-z_]+)\b")
SUFFIXES = ("_bucket", "_sum", "_count")


def exported_metric_names() -> set[str]:
    configure(Settings(database_url="postgresql+asyncpg://u@h/d", kafka_bootstrap_servers="h:9092"))
    observer = OtelObserver()
    registry = make_registry()
    box, inbox = registry.get(OUTBOX_BOX), registry.get(INBOX_BOX)
    item = ItemRecord(1, uuid.uuid4(), box.name, "e", "k", 0, {}, 0, datetime.now(UTC))
    observer.created(box, ["e"])
    observer.claimed(box, 1)
    outcomes = ("delivered", "failed", "dead", "discarded", "unavailable")
    observer.outcomes(box, [(item, outcome) for outcome in outcomes], 0.01)
    observer.stored(inbox, 2, 1)
    observer.consumer_lag(inbox, "t", 0, 3)
    observer.depth(box, 1, 1.0, 1)
    observer.slot_lag("svc_outbox", 4096)
    text = render_metrics().decode()
    return {m.group(1) for m in re.finditer(r"^([a-z_]+)[{ ]", text, re.MULTILINE)}


def queried(expressions: list[str]) -> set[str]:
    return {name for expr in expressions for name in METRIC.findall(expr)}


def test_dashboard_panels_query_exported_metrics() -> None:
    dashboard = json.loads((DEPLOY / "dashboard.json").read_text())
    expressions = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    assert len(dashboard["panels"]) >= 8
    names = queried(expressions)
    assert names - exported_metric_names() == set()
    assert {
        "outbox_pending_depth",
        "outbox_delivery_lag_seconds_bucket",
        "inbox_consumer_lag",
    } <= names


def test_alert_rules_query_exported_metrics() -> None:
    rules = yaml.safe_load((DEPLOY / "alerts.yaml").read_text())
    expressions = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    alerts = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    assert {
        "OutboxStuck",
        "OutboxItemsFailing",
        "InboxConsumerLagGrowing",
        "OutboxDebeziumSlotLag",
    } <= alerts
    assert queried(expressions) - exported_metric_names() == set()


def test_prometheus_loads_the_alert_rules() -> None:
    config = yaml.safe_load((DEPLOY / "prometheus.yaml").read_text())
    assert config["rule_files"] == ["/otel-lgtm/{{ cookiecutter.project_slug }}-alerts.yaml"]


def test_the_slot_lag_gauge_is_exported_in_bytes_and_dropped_with_its_slot() -> None:
    names = exported_metric_names()
    assert "outbox_debezium_lag_bytes" in names
    observer = OtelObserver()
    observer.slot_lag("svc_outbox", None)  # the slot is gone: no sample rather than a stale one
    text = render_metrics().decode()
    assert not re.search(r'^outbox_debezium_lag_bytes\{[^}]*slot="svc_outbox"', text, re.M)
