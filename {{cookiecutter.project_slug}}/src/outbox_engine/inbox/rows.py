"""One Kafka message -> one inbox row (a dict of the inbox table's columns).

`message_row` never raises: a message that cannot be processed (no value, a key that is not
UTF-8 or too long, a value over `max_message_bytes`) becomes a row with the reason in the
`rejected` header, stored like any other and failed in processing, so it is never dropped
and never blocks its partition. `message_uuid` names the message: its `message-id` header,
else its `Idempotency-Key`, else an id derived from where it is *and* what it is, so a
redelivery maps to the stored row and a different message at a reused offset does not.
A row's `uuid` is the id's canonical text (lower-case 8-4-4-4-12): an id header already in
that form (any case) is taken as it is, without building a `uuid.UUID` per message (the
consumer's hot path; PostgreSQL parses it on insert, to the same 128 bits). Any other form
goes through `message_uuid`. `unstorable_row` reduces a row the database refused to one
that always stores.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import Any

from confluent_kafka import Message

from outbox_engine.config.registry import Box

# Names the message id when a producer sent none: uuid5(NAMESPACE, "topic/partition/offset").
INBOX_NAMESPACE = uuid.UUID("6f1c8a9e-2b8d-4c63-9b6e-3f2f5d0c7a11")
REJECTED_HEADER = "rejected"
# The headers that name a message, in the order they are asked (lower-case).
ID_HEADERS = ("message-id", "idempotency-key")
# An id header in this form is the id as it is (lower-cased): `uuid.UUID` would give the
# same 128 bits. Every other form (braces, "urn:uuid:", no hyphens, ...) is parsed by it.
_CANONICAL = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
).fullmatch


def _decode(value: bytes | str | None) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return value.decode("utf-8", "replace")


def _id_header(headers: dict[str, str]) -> tuple[str, str] | None:
    """The first of ID_HEADERS with a value: (name, value)."""
    for name in ID_HEADERS:
        raw = headers.get(name)
        if raw:
            return name, raw
    return None


def message_uuid(
    headers: dict[str, str],
    topic: str,
    partition: int,
    offset: int,
    content: tuple[int, bytes | None, bytes | None] = (0, None, None),
) -> uuid.UUID:
    """The message id: `message-id` header, else `Idempotency-Key`, else derived.

    A derived id covers where the message is (topic/partition/offset) *and* what it is (its
    timestamp, key and value, as `content`): the same message read again (a redelivery, a
    replay) gets the same id, while a different message at the same offset (a topic deleted
    and recreated starts again at 0) does not, so it is stored instead of being dropped as
    a duplicate of the old one."""
    found = _id_header(headers)
    if found is not None:
        name, raw = found
        try:
            return uuid.UUID(raw)
        except ValueError:
            return uuid.uuid5(INBOX_NAMESPACE, f"{name}:{raw}")
    timestamp, key, value = content
    digest = hashlib.sha256()
    for part in (key, value):
        digest.update(b"-" if part is None else b"+%d:" % len(part))
        digest.update(part or b"")
    return uuid.uuid5(
        INBOX_NAMESPACE, f"{topic}/{partition}/{offset}/{timestamp}/{digest.hexdigest()}"
    )


def _exact(value: bytes | str | None) -> str:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return "hex:" + value.hex()
    return value or ""


def _clean(text: str) -> str:
    """PostgreSQL text and jsonb cannot hold NUL characters."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def unstorable_row(row: dict[str, Any], error: BaseException) -> dict[str, Any]:
    """A row the database refused, reduced to what always stores: it fails in processing
    with the reason instead of blocking its partition."""
    reason = f"unstorable message: {type(error).__name__}: {str(error).splitlines()[0][:300]}"
    return {
        **row,
        "event_name": "unknown",
        "event_key": f"{row['source_topic']}/{row['source_partition']}",
        "payload": b"",
        "headers": {REJECTED_HEADER: _clean(reason)},
    }


def _canonical_id(id_sources: dict[str, str]) -> str | None:
    """The id header `message_uuid` would read, as lower-case text, when it is already in
    canonical form (see the module docstring); None: `message_uuid` names the message."""
    found = _id_header(id_sources)
    if found is not None and _CANONICAL(found[1]):
        return found[1].lower()
    return None


def message_row(box: Box, message: Message) -> dict[str, Any]:
    """The inbox row for one Kafka message (never raises: bad input becomes a reason)."""
    config = box.inbox_config
    topic, partition, offset = (
        message.topic() or "",
        message.partition() or 0,
        message.offset() or 0,
    )
    headers: dict[str, str] = {}
    raw_headers = message.headers() or []
    pairs = raw_headers.items() if isinstance(raw_headers, dict) else raw_headers
    id_sources: dict[str, str] = {}
    for name, value in pairs:
        if value is None:
            # A header without a value is stored as absent: the Debezium relay sends a null
            # header where the worker sends none (an item without causation-id, ...).
            continue
        key = _clean(str(name).lower())
        # A repeated header keeps its first value, as most Kafka clients read it.
        headers.setdefault(key, _clean(_decode(value)))
        if key in ID_HEADERS and key not in id_sources:
            # Ids come from the exact bytes: two different undecodable ids must not collide.
            id_sources[key] = _exact(value)
    reasons = []
    raw_key = message.key()
    try:
        event_key = raw_key.decode("utf-8") if isinstance(raw_key, bytes) else (raw_key or "")
    except UnicodeDecodeError:
        event_key = raw_key.hex() if isinstance(raw_key, bytes) else ""
        reasons.append("message key is not UTF-8")
    event_key = _clean(event_key)
    if not event_key:
        # Without a key, the Kafka partition is the ordering unit.
        event_key = f"{topic}/{partition}"
    if len(event_key) > 255:
        reasons.append("message key longer than 255 characters")
        event_key = event_key[:255]
    value = message.value()
    payload = (
        value if isinstance(value, bytes) else (value.encode() if isinstance(value, str) else b"")
    )
    if value is None:
        reasons.append("message has no value")
    if len(payload) > config.max_message_bytes:
        reasons.append(
            f"message of {len(payload)} bytes exceeds max_message_bytes {config.max_message_bytes}"
        )
        payload = b""
    event_name = (headers.get("event-name") or config.default_event_name)[:255]
    if reasons:
        headers[REJECTED_HEADER] = "; ".join(reasons)
    message_id = _canonical_id(id_sources)
    if message_id is None:
        _kind, timestamp = message.timestamp()
        message_id = str(
            message_uuid(
                id_sources,
                topic,
                partition,
                offset,
                (
                    timestamp,
                    raw_key if isinstance(raw_key, bytes) else None,
                    value if isinstance(value, bytes) else None,
                ),
            )
        )
    return {
        "uuid": message_id,
        "event_name": event_name,
        "event_key": event_key,
        "bucket": box.bucket_for(event_key),
        "payload": payload,
        "headers": headers,
        "source_topic": topic,
        "source_partition": partition,
        "source_offset": offset,
    }
