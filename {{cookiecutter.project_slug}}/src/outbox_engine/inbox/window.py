"""The inbox's dedupe window, checked at start.

An inbox drops a message as a duplicate only while the row of its id is stored: rows are
purged by retention (`retention.delivered` after they were handled, `retention.failed`
after they failed). A message that Kafka delivers again after its row was purged (a consumer
group whose committed offsets expired, `offsets.retention.minutes`, 7 days by default, and
restarts at `earliest`; an operator who resets offsets; a producer that re-sends) is stored
and handled again. So the window must be at least as long as the input topics keep
messages. The consumer compares both at start and warns, naming the box, the topic and what
to change, when the topic keeps messages longer than the inbox keeps their ids.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource

from outbox_engine.config.registry import Box
from outbox_engine.transports.kafka_logs import client_config

log = logging.getLogger(__name__)

# Client settings an admin client can take from the consumer's configuration.
_ADMIN_PREFIXES = ("bootstrap.servers", "security.", "sasl.", "ssl.", "client.id", "socket.")


def topic_retention(kafka_config: Mapping[str, Any], topics: list[str]) -> dict[str, int | None]:
    """Each topic's `retention.ms` (None: kept forever, -1)."""
    admin = AdminClient(
        client_config({k: v for k, v in kafka_config.items() if k.startswith(_ADMIN_PREFIXES)})
    )
    try:
        futures = admin.describe_configs(
            [ConfigResource(ConfigResource.Type.TOPIC, topic) for topic in topics],
            request_timeout=10,
        )
        retention: dict[str, int | None] = {}
        for resource, future in futures.items():
            entry = future.result(timeout=15).get("retention.ms")
            value = int(entry.value) if entry is not None and entry.value is not None else -1
            retention[resource.name] = None if value < 0 else value
        return retention
    finally:
        admin.poll(0)  # hands librdkafka's queued log lines to the logger


def window_warnings(box: Box, retention: Mapping[str, int | None]) -> list[str]:
    """What is wrong with the box's dedupe window for these topic retentions."""
    kept = box.config.retention.delivered
    warnings = []
    for topic, ms in sorted(retention.items()):
        topic_keeps = "forever" if ms is None else _duration(timedelta(milliseconds=ms))
        if ms is None or timedelta(milliseconds=ms) > kept:
            warnings.append(
                f"inbox {box.name}: topic {topic} keeps messages {topic_keeps}, but the inbox "
                f"keeps message ids for {_duration(kept)} (retention.delivered): a message "
                "delivered again after that (expired group offsets, an offset reset, a replay) "
                "is handled again. Set retention.delivered to at least the topic's "
                "retention.ms, or shorten the topic's (see docs/guarantees.md, dedupe window)"
            )
    return warnings


def check_window(box: Box, kafka_config: Mapping[str, Any]) -> list[str]:
    """Reads the topics' retention and logs the window (warnings when too short)."""
    topics = list(box.inbox_config.topics)
    try:
        retention = topic_retention(kafka_config, topics)
    except (KafkaException, TimeoutError) as exc:
        log.warning(
            "inbox %s: cannot read the retention of %s (%s); dedupe window not checked",
            box.name,
            ", ".join(topics),
            exc,
        )
        return []
    warnings = window_warnings(box, retention)
    for warning in warnings:
        log.warning("%s", warning)
    if not warnings:
        log.info(
            "inbox %s: dedupe window %s covers the retention of %s",
            box.name,
            _duration(box.config.retention.delivered),
            ", ".join(topics),
        )
    return warnings


def _duration(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
