"""Items of every shape the two relays must turn into the same Kafka message: created
through `create()` (plain; with custom headers; inside an inbox handler's chain, so with a
causation id and hop > 0; with a caller's trace context; payloads of every byte value, empty,
non-ASCII keys and names) and inserted through the model with a fixed `created_at` (whole
second, .120000 and .000005: Python's isoformat() omits the fraction only for the first),
which also gives items without any trace context.

`Expected` keeps, per message id, what the worker-only parts of the message must be (custom
headers) and the exact created-at text where the test fixed it."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass, field

from outbox_engine.creation.chain import handling

from ..support import OUTBOX_BOX, OutboxItem
from .harness import DebeziumService

ALL_BYTES = bytes(range(256))
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
FIXED_TIMES = (
    (dt.datetime(2026, 1, 2, 3, 4, 5, 0, tzinfo=dt.UTC), "2026-01-02T03:04:05+00:00"),
    (dt.datetime(2026, 1, 2, 3, 4, 5, 120000, tzinfo=dt.UTC), "2026-01-02T03:04:05.120000+00:00"),
    (dt.datetime(2026, 1, 2, 3, 4, 5, 5, tzinfo=dt.UTC), "2026-01-02T03:04:05.000005+00:00"),
)


@dataclass
class Expected:
    custom: dict[str, dict[str, str]] = field(default_factory=dict)  # id -> custom headers
    created_at: dict[str, str] = field(default_factory=dict)  # id -> exact created-at text
    chained: set[str] = field(default_factory=set)  # ids created inside a handler's chain
    ids: list[str] = field(default_factory=list)


async def create_variety(service: DebeziumService, tag: str, expected: Expected) -> None:
    """One of each shape (about 20 items), committed in a few transactions."""
    outbox = service.container.outbox()
    factory = service.container.session_factory()
    specs: list[tuple[str, str, bytes | dict[str, object], dict[str, str] | None]] = [
        (f"{tag}-plain", "thing_done", {"n": 1, "text": "plain"}, None),
        (f"{tag}-bytes", "binary", ALL_BYTES, None),
        (f"{tag}-empty", "empty", b"", None),
        (f"{tag}-clé-ü", "événement_créé", {"ünï": "cødé ✓"}, None),
        (f"{tag}-custom", "custom", {"n": 2}, {"x-tenant": "t-1", "content-language": "de"}),
        (f"{tag}-trace", "traced", {"n": 3}, {"traceparent": TRACEPARENT, "tracestate": "k=v"}),
    ]
    async with factory() as session, session.begin():
        for key, name, payload, headers in specs:
            message_id = await outbox.create(
                session,
                OutboxItem,
                event_key=key,
                event_name=name,
                payload=payload,
                headers=headers,
            )
            expected.ids.append(str(message_id))
            if headers and key.endswith("-custom"):
                expected.custom[str(message_id)] = headers
    # Inside a handler: the chain of the message being handled (causation id, hop + 1).
    parent, correlation = str(uuid.uuid4()), str(uuid.uuid4())
    with handling(correlation, parent, 2):
        async with factory() as session, session.begin():
            ids = await outbox.create_batch(
                session,
                OutboxItem,
                [
                    {"event_key": f"{tag}-chain", "event_name": "chained", "payload": {"i": i}}
                    for i in range(3)
                ],
            )
    expected.ids += [str(i) for i in ids]
    expected.chained |= {str(i) for i in ids}
    # Fixed creation times, through the model (no trace context, no create span).
    box = service.box("worker")
    async with factory() as session, session.begin():
        for index, (created_at, text) in enumerate(FIXED_TIMES):
            message_id = uuid.uuid4()
            key = f"{tag}-fixed-{index}"
            session.add(
                OutboxItem(
                    uuid=message_id,
                    event_name="fixed_time",
                    event_key=key,
                    bucket=box.bucket_for(key),
                    payload=json.dumps({"at": text}).encode(),
                    headers={"correlation-id": str(message_id), "hop": 0},
                    created_at=created_at,
                )
            )
            expected.ids.append(str(message_id))
            expected.created_at[str(message_id)] = text
    assert box.name == OUTBOX_BOX
