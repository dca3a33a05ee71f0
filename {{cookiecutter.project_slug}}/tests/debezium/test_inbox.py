"""Another service's inbox consumes what Debezium relayed, unchanged: the baked project's inbox
box, reading the Debezium box's topic, stores every item exactly once under the item's own
message id, with its event name, key and payload bytes, and its handler applies each once
(the guarantees suite's `EffectHandler`: one effect row per handled message). Debezium's
null-valued headers (no causation id outside a handler, no trace context) must not break
the consumer, and are stored as absent, as the worker's message (which has no such header)
would be: the stored headers do not tell the two relays apart."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from sqlalchemy import select, text

from outbox_engine.config.registry import Box
from outbox_engine.creation.chain import handling
from outbox_engine.inbox.consumer import InboxConsumer

from ..guarantees.report import Row
from ..guarantees.transports import EFFECTS_TABLE
from ..support import INBOX_BOX, InboxItem, OutboxItem, running_worker, wait_for
from .conftest import ServiceFactory
from .flow import drain
from .harness import DebeziumService
from .items import ALL_BYTES

pytestmark = pytest.mark.connect

KEYS, PER_KEY, CHAINED = 20, 20, 60


@asynccontextmanager
async def consuming(service: DebeziumService, box: Box) -> AsyncIterator[InboxConsumer]:
    consumer = InboxConsumer(
        box,
        service.engine,
        service.container.settings().kafka_config(),
        f"dbz-inbox-{uuid.uuid4().hex[:8]}",
        observer=service.container.observer(),
    )
    task = asyncio.create_task(consumer.run())
    try:
        yield consumer
    finally:
        consumer.stop()
        await asyncio.wait_for(task, 30)


async def create_items(service: DebeziumService) -> dict[str, tuple[str, str, bytes]]:
    """message id -> (event name, key, payload): plain JSON, every byte value, and items
    created inside a handler's chain (with a causation id)."""
    outbox = service.container.outbox()
    factory = service.container.session_factory()
    created: dict[str, tuple[str, str, bytes]] = {}
    for seq in range(PER_KEY):
        batch: list[dict[str, object]] = [
            {"event_key": f"k{key}", "event_name": "seq", "payload": {"seq": seq}}
            for key in range(KEYS)
        ]
        if seq % 5 == 0:
            batch.append({"event_key": "bin", "event_name": "binary", "payload": ALL_BYTES})
        async with factory() as session, session.begin():
            ids = await outbox.create_batch(session, OutboxItem, batch)
        for message_id, spec in zip(ids, batch, strict=True):
            payload = spec["payload"]
            body = payload if isinstance(payload, bytes) else b'{"seq":%d}' % seq
            created[str(message_id)] = (str(spec["event_name"]), str(spec["event_key"]), body)
    with handling(str(uuid.uuid4()), str(uuid.uuid4()), 0):
        async with factory() as session, session.begin():
            chained: list[dict[str, object]] = [
                {"event_key": f"c{i % 7}", "event_name": "chained", "payload": b"c%d" % i}
                for i in range(CHAINED)
            ]
            ids = await outbox.create_batch(session, OutboxItem, chained)
        for message_id, spec in zip(ids, chained, strict=True):
            raw = spec["payload"]
            assert isinstance(raw, bytes)
            created[str(message_id)] = ("chained", str(spec["event_key"]), raw)
    return created


async def test_an_inbox_stores_and_applies_each_debezium_relayed_item_once(
    dbz: ServiceFactory, ledger: list[Row]
) -> None:
    started = time.monotonic()
    async with dbz("inbox") as service:
        await service.register()
        await service.to_debezium()
        created = await create_items(service)
        await drain(service)
        registry = service.registry("debezium")
        async with (
            consuming(service, registry.get(INBOX_BOX)) as consumer,
            running_worker(service.container, registry, boxes=[INBOX_BOX]),
        ):

            async def applied() -> bool:
                return await _effects(service) >= len(created)

            await wait_for(applied, within=90)
            await asyncio.sleep(1.0)  # a duplicate stored or applied late would show now
        async with service.container.session_factory()() as session:
            rows = list((await session.execute(select(InboxItem))).scalars())
        effects, distinct = await _effects(service), await _effects(service, distinct=True)
        received = consumer.received
    stored = {str(r.uuid): (r.event_name, r.event_key, bytes(r.payload)) for r in rows}
    empty = sum(1 for r in rows for v in r.headers.values() if v == "")
    unchained = [r for r in rows if r.event_name != "chained"]
    chained = [r for r in rows if r.event_name == "chained"]
    ledger.append(
        Row(
            scenario="inbox",
            created=len(created),
            delivered=len(stored),
            inbox_expected=len(created),
            inbox_stored=len(rows),
            inbox_effects=effects,
            duplicated=received - len(created),
            seconds=time.monotonic() - started,
            notes=[
                f"inbox received {received} messages, stored {len(rows)}, {effects} effects; "
                f"{empty} stored headers empty"
            ],
            passed=stored == created and effects == distinct == len(created),
        )
    )
    assert len(rows) == len(created)
    assert stored == created
    assert (effects, distinct) == (len(created), len(created))
    assert all(r.headers.get("causation-id") for r in chained)
    assert all(r.headers["correlation-id"] for r in rows)
    # Debezium sent these with a null value: stored as absent, like the worker's message.
    assert [r for r in unchained if "causation-id" in r.headers] == []
    assert empty == 0


async def _effects(service: DebeziumService, distinct: bool = False) -> int:
    what = "count(DISTINCT message_id)" if distinct else "count(*)"
    async with service.engine.connect() as conn:
        return int((await conn.execute(text(f"SELECT {what} FROM {EFFECTS_TABLE}"))).scalar_one())
