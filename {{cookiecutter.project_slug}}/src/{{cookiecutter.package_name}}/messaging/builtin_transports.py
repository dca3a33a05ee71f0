"""Transports that ship with the engine: Kafka, HTTP webhook and log.

Generated classes in `transports/` subclass these; configure them in `config/boxes.yaml`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Mapping

import httpx

from .kafka import KafkaProducer
from .observe import Observer
from .resources import Resources
from .transport import (
    ItemRecord,
    PermanentFailure,
    PipelinedTransport,
    Transport,
    TransportUnavailable,
)

log = logging.getLogger(__name__)

# Item header names that the Kafka transport sends as Kafka headers besides the user's own.
SYSTEM_HEADERS = ("correlation-id", "causation-id", "hop")


def kafka_headers(
    item: ItemRecord, trace: Mapping[str, str] | None = None
) -> list[tuple[str, bytes]]:
    """The Kafka headers of an item: ids, chain, trace context and the user's headers."""
    headers: list[tuple[str, bytes]] = [
        ("message-id", str(item.uuid).encode()),
        ("event-name", item.event_name.encode()),
        ("created-at", item.created_at.isoformat().encode()),
    ]
    for name, value in {**item.headers, **(trace or {})}.items():
        if value is None:
            continue
        if isinstance(value, str):
            text = value
        elif isinstance(value, int) and not isinstance(value, bool):
            text = str(value)
        else:
            text = json.dumps(value)
        headers.append((name, text.encode()))
    return headers


class KafkaTransport(PipelinedTransport):
    """Produce the item to a Kafka topic, key = event_key, and wait for the delivery report."""

    def __init__(self, topic: str, key_from: str = "event_key") -> None:
        if not topic:
            raise ValueError("KafkaTransport needs a non-empty 'topic'")
        if key_from not in ("event_key", "none"):
            raise ValueError("key_from must be 'event_key' or 'none'")
        self.topic = topic
        self.key_from = key_from
        self._producer: KafkaProducer | None = None
        self._observer = Observer()

    async def setup(self, resources: Resources) -> None:
        self._producer = resources.producer
        self._observer = resources.observer

    def topic_for(self, item: ItemRecord) -> str:
        """Override to route items to topics by content."""
        return self.topic

    def enqueue(self, item: ItemRecord, payload: bytes) -> Awaitable[None]:
        if self._producer is None:
            raise TransportUnavailable("KafkaTransport used before setup()")
        key = item.event_key.encode() if self.key_from == "event_key" else None
        topic = self.topic_for(item)
        span = self._observer.publishing(item, topic)
        future = self._producer.produce(topic, payload, key, kafka_headers(item, span.headers()))
        # The publish span ends with the delivery report, not when librdkafka took the message.
        future.add_done_callback(lambda f: span.end(None if f.cancelled() else f.exception()))
        return future


class HttpWebhookTransport(Transport):
    """POST the payload to a URL; 2xx is success, 4xx fails at once, 5xx/network retry."""

    def __init__(
        self,
        url: str,
        method: str = "POST",
        headers: Mapping[str, str] | None = None,
        timeout_seconds: float = 10.0,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError("HttpWebhookTransport 'url' must start with http:// or https://")
        self.url = url
        self.method = method.upper()
        self.headers = dict(headers or {})
        self.timeout = timeout_seconds
        self._http: httpx.AsyncClient | None = None

    async def setup(self, resources: Resources) -> None:
        self._http = resources.http

    async def __call__(self, item: ItemRecord, payload: bytes) -> bool:
        if self._http is None:
            raise TransportUnavailable("HttpWebhookTransport used before setup()")
        headers = {
            **self.headers,
            "Content-Type": "application/json",
            "Idempotency-Key": str(item.uuid),
            "X-Event-Name": item.event_name,
        }
        try:
            response = await self._http.request(
                self.method, self.url, content=payload, headers=headers, timeout=self.timeout
            )
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise TransportUnavailable(f"webhook {self.url}: {exc}") from None
        if 200 <= response.status_code < 300:
            return True
        if 400 <= response.status_code < 500 and response.status_code not in (408, 429):
            raise PermanentFailure(f"webhook {self.url}: HTTP {response.status_code}")
        raise RuntimeError(f"webhook {self.url}: HTTP {response.status_code}")


class LogTransport(Transport):
    """Log the item (never its payload unless asked): a default for new boxes and for tests."""

    def __init__(self, level: str = "INFO", include_payload: bool = False) -> None:
        self.level = logging.getLevelName(level.upper())
        if not isinstance(self.level, int):
            raise ValueError(f"unknown log level {level!r}")
        self.include_payload = include_payload

    async def __call__(self, item: ItemRecord, payload: bytes) -> bool:
        extra = {"box": item.box, "item_id": item.id, "message_id": str(item.uuid)}
        if self.include_payload:
            extra["payload"] = payload.decode("utf-8", "replace")
        log.log(
            self.level, "item %s %s key=%s", item.box, item.event_name, item.event_key, extra=extra
        )
        await asyncio.sleep(0)
        return True
