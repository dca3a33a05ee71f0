"""Transports that ship with the engine: Kafka, HTTP webhook and log.

Generated classes in `transports/` subclass these; configure them in `config/boxes.yaml`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Awaitable, Mapping, Sequence
from datetime import datetime

import httpx

from outbox_engine.observability.observer import NO_SPAN, Observer, PublishSpan
from outbox_engine.transports.base import (
    ItemRecord,
    PermanentFailure,
    PipelinedTransport,
    Transport,
    TransportUnavailable,
)
from outbox_engine.transports.kafka import KafkaProducer
from outbox_engine.transports.kafka_reports import OutgoingMessage
from outbox_engine.transports.resources import Resources

log = logging.getLogger(__name__)

# Item header names that the Kafka transport sends as Kafka headers besides the user's own.
SYSTEM_HEADERS = ("correlation-id", "causation-id", "hop")


def kafka_headers(
    item: ItemRecord, trace: Mapping[str, str] | None = None, created_at: str | None = None
) -> list[tuple[str, bytes]]:
    """The Kafka headers of an item: ids, chain, trace context and the user's headers.

    `created_at` is the item's ISO 8601 creation time when the caller has it already (items
    of one transaction share it)."""
    message_id = str(item.uuid)
    headers: list[tuple[str, bytes]] = [
        ("message-id", message_id.encode()),
        ("event-name", _encoded(item.event_name)),
        ("created-at", (created_at or item.created_at.isoformat()).encode()),
    ]
    append = headers.append
    for name, value in (item.headers if not trace else {**item.headers, **trace}).items():
        kind = value.__class__
        if kind is str:
            append((name, headers[0][1] if value == message_id else value.encode()))
        elif kind is int:
            append((name, _SMALL_INTS[value] if 0 <= value < 64 else str(value).encode()))
        elif value is None:
            continue
        elif isinstance(value, str):
            append((name, value.encode()))
        elif isinstance(value, int) and not isinstance(value, bool):
            append((name, str(value).encode()))
        else:
            append((name, json.dumps(value).encode()))
    return headers


_SMALL_INTS = [str(n).encode() for n in range(64)]  # hop counts, mostly


@functools.lru_cache(maxsize=1024)
def _encoded(text: str) -> bytes:
    return text.encode()


class KafkaTransport(PipelinedTransport):
    """Produce the item to a Kafka topic, key = event_key, and wait for the delivery report."""

    # librdkafka's idempotent producer writes a partition's messages in order, and what it
    # cannot write (the broker down or the queue timing out) fails in order too. What could
    # still leave a gap (the broker refusing one record batch, e.g. a message over the
    # topic's max.message.bytes, while later ones pass) is caught by the relay after the
    # batch: logged as an error and counted, never silent.
    fails_in_order = True

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

    def enqueue_many(
        self, items: Sequence[tuple[ItemRecord, bytes]]
    ) -> Awaitable[Sequence[BaseException | bool | None]]:
        """The relay's path: the whole batch handed to librdkafka, one future for all of it."""
        if self._producer is None:
            raise TransportUnavailable("KafkaTransport used before setup()")
        by_key = self.key_from == "event_key"
        observer = self._observer
        spans: list[tuple[int, PublishSpan]] = []
        messages: list[OutgoingMessage] = []
        stamps: dict[datetime, str] = {}
        tracing = observer.observes("publishing")
        trace: dict[str, str] | None = None
        for index, (item, payload) in enumerate(items):
            topic = self.topic_for(item)
            if tracing:
                span = observer.publishing(item, topic)
                trace = span.headers()
                if span is not NO_SPAN:
                    spans.append((index, span))
            created_at = stamps.get(item.created_at)
            if created_at is None:
                created_at = stamps[item.created_at] = item.created_at.isoformat()
            messages.append(
                (
                    topic,
                    payload,
                    item.event_key.encode() if by_key else None,
                    kafka_headers(item, trace, created_at),
                )
            )
        future = self._producer.produce_batch(messages)
        if spans:

            def end_spans(done: asyncio.Future[list[Exception | None]]) -> None:
                errors: list[Exception | None] = (
                    [None] * len(messages) if done.cancelled() else done.result()
                )
                for index, span in spans:
                    span.end(errors[index])

            future.add_done_callback(end_spans)
        return future


# Item header names that carry its W3C trace context; the webhook sends them as HTTP headers.
TRACE_HEADERS = ("traceparent", "tracestate")


class HttpWebhookTransport(Transport):
    """POST the payload to a URL; 2xx is success, 4xx fails at once, 5xx/network retry.

    Headers: the configured ones; `Content-Type: application/json` unless one is configured
    (in any letter case); `Idempotency-Key` (the message id) and `X-Event-Name`; and the
    item's `traceparent`/`tracestate`, so the item's trace continues at the receiver. The
    request runs in the item's trace context: an instrumented HTTP client makes its span a
    child of the item's and sends that span as the receiver's parent (same trace id)."""

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
        if not any(name.lower() == "content-type" for name in self.headers):
            self.headers["Content-Type"] = "application/json"
        self.timeout = timeout_seconds
        self._http: httpx.AsyncClient | None = None
        self._observer = Observer()

    async def setup(self, resources: Resources) -> None:
        self._http = resources.http
        self._observer = resources.observer

    async def __call__(self, item: ItemRecord, payload: bytes) -> bool:
        if self._http is None:
            raise TransportUnavailable("HttpWebhookTransport used before setup()")
        headers = {
            **self.headers,
            "Idempotency-Key": str(item.uuid),
            "X-Event-Name": item.event_name,
        }
        for name in TRACE_HEADERS:
            value = item.headers.get(name)
            if isinstance(value, str):
                headers[name] = value
        try:
            with self._observer.continuing(item.headers):
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
