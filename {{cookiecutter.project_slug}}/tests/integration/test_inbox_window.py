"""The inbox's dedupe window checked against the real topics' retention at consumer start."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.inbox.window import check_window

from ..support import INBOX_BOX, make_registry

DAY_MS = 86_400_000


def _topic(bootstrap: str, name: str, retention_ms: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"retention.ms": str(retention_ms)}
    admin.create_topics([NewTopic(name, num_partitions=1, config=config)])[name].result(timeout=60)


def test_a_topic_that_keeps_messages_longer_than_the_inbox_keeps_ids_is_warned_about(
    container: Container, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    bootstrap = container.settings().kafka_bootstrap_servers
    _topic(bootstrap, f"{topic}-long", 30 * DAY_MS)
    _topic(bootstrap, f"{topic}-short", 1 * DAY_MS)
    _topic(bootstrap, f"{topic}-forever", -1)
    registry = make_registry(
        inbox={
            "topics": [f"{topic}-long", f"{topic}-short", f"{topic}-forever"],
            "retention": {"delivered": "P7D", "failed": "P30D"},
        }
    )
    caplog.set_level(logging.INFO)
    warnings = check_window(registry.get(INBOX_BOX), container.settings().kafka_config())
    assert len(warnings) == 2
    forever, long = warnings
    assert f"topic {topic}-long keeps messages 30d, but the inbox keeps message ids for 7d" in long
    assert "retention.delivered" in long
    assert f"topic {topic}-forever keeps messages forever" in forever
    assert [r.levelname for r in caplog.records if "keeps message ids" in r.getMessage()] == [
        "WARNING",
        "WARNING",
    ]


def test_a_window_that_covers_the_topics_is_logged_without_a_warning(
    container: Container, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    _topic(container.settings().kafka_bootstrap_servers, topic, 7 * DAY_MS)
    registry = make_registry(inbox={"topics": [topic], "retention": {"delivered": "P7D"}})
    caplog.set_level(logging.INFO)
    assert check_window(registry.get(INBOX_BOX), container.settings().kafka_config()) == []
    assert any(
        f"dedupe window 7d covers the retention of {topic}" in r.getMessage()
        for r in caplog.records
    )
