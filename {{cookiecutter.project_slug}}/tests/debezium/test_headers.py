"""The same items relayed once by Debezium and once by the service's own worker give the same
Kafka message: topic, partition, key, value bytes, and header names, values and order,
except exactly these documented differences (docs/debezium.md):

* a header whose item has no value (no causation id outside a handler, no trace context) is
  sent by Debezium with a null value, and not at all by the worker;
* the item's own custom headers are sent by the worker only;
* `traceparent`: Debezium sends the creating span's, the worker its publish span's (same
  trace id; identical without OpenTelemetry); for an item without trace context the worker
  may append its publish span's, which Debezium sends as null.

Procedure: items of every shape (items.py) are created while the box is still relayed by
the worker but no worker runs, so they are pending; the switch to Debezium copies them (the
switch's copy); more items of every shape are created after the switch (the capture
trigger). Debezium relays all of them; then they are made pending again and a worker
(relay: worker) relays the same rows to the same topic. Each message id then has one message
from each relay, told apart by offset (Debezium's came first)."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import select, update

from outbox_engine.store.status import ItemStatus

from ..guarantees.report import Row
from ..support import OUTBOX_BOX, OutboxItem, running_worker, wait_for
from .conftest import ServiceFactory
from .flow import drain
from .harness import DebeziumService
from .items import Expected, create_variety
from .messages import Message, read_messages

pytestmark = pytest.mark.connect

STANDARD = (
    "message-id",
    "event-name",
    "created-at",
    "hop",
    "tracestate",
    "traceparent",
    "causation-id",
    "correlation-id",
)


def differences(debezium: Message, worker: Message, custom: dict[str, bytes]) -> list[str]:
    """What differs beyond the documented differences (empty: none)."""
    found = []
    for what in ("topic", "key", "value"):
        if getattr(debezium, what) != getattr(worker, what):
            found.append(f"{what}: {getattr(debezium, what)!r} != {getattr(worker, what)!r}")
    if debezium.partition != worker.partition:
        found.append(
            f"partition: Debezium {debezium.partition}, worker {worker.partition} (both must "
            "hash the key as Kafka's Java client does: librdkafka's partitioner murmur2_random)"
        )
    names = [name for name, _ in debezium.headers]
    if names != list(STANDARD):
        found.append(f"Debezium's header names {names}, not {list(STANDARD)}")
    nulls = {name for name, value in debezium.headers if value is None}
    worker_custom = {n: v for n, v in worker.headers if n not in STANDARD}
    if worker_custom != custom:
        found.append(f"worker's custom headers {worker_custom}, item's {custom}")
    expected = [(n, v) for n, v in debezium.headers if v is not None and n != "traceparent"]
    got = [(n, v) for n, v in worker.headers if n in STANDARD and n != "traceparent"]
    if got != expected:
        found.append(f"headers (traceparent aside): worker {got} != Debezium {expected}")
    ours, theirs = debezium.header("traceparent"), worker.header("traceparent")
    if ours is not None and (theirs is None or theirs.split(b"-")[1] != ours.split(b"-")[1]):
        found.append(f"traceparent {ours!r}: the worker's {theirs!r} has another trace id")
    # An item without trace context: the worker's publish span's traceparent comes last.
    appended = ours is None and "traceparent" in nulls and theirs is not None
    if appended and worker.headers[-1][0] != "traceparent":
        found.append(f"worker's own traceparent not last: {worker.headers}")
    return found


async def test_debezium_sends_the_workers_message_but_for_the_documented_differences(
    dbz: ServiceFactory, ledger: list[Row]
) -> None:
    started = time.monotonic()
    expected = Expected()
    async with dbz("headers") as service:
        await service.register()
        await create_variety(service, "before", expected)
        switched = await service.to_debezium()
        await create_variety(service, "after", expected)
        total = len(expected.ids)
        await drain(service)
        relayed = read_messages(service.bootstrap, service.topic, expect=total)
        async with service.container.session_factory()() as session, session.begin():
            await session.execute(
                update(OutboxItem).values(status=int(ItemStatus.PENDING), processed_at=None)
            )
        worker_registry = service.registry("worker")
        async with running_worker(service.container, worker_registry, boxes=[OUTBOX_BOX]):
            await wait_for(lambda: _none_pending(service), within=60)
        everything = read_messages(service.bootstrap, service.topic, expect=2 * total)
        custom = await custom_headers(service)
    first = {(m.partition, m.offset) for m in relayed}
    by_debezium = {m.message_id: m for m in relayed}
    by_worker = {m.message_id: m for m in everything if (m.partition, m.offset) not in first}
    assert switched.copied == total // 2  # the "before" half, pending at the switch
    assert (len(relayed), len(everything)) == (total, 2 * total)
    assert sorted(by_debezium) == sorted(by_worker) == sorted(expected.ids)
    for message_id, given in expected.custom.items():
        assert {n: v.encode() for n, v in given.items()}.items() <= custom[message_id].items()
    problems = {
        message_id: found
        for message_id in expected.ids
        if (
            found := differences(by_debezium[message_id], by_worker[message_id], custom[message_id])
        )
    }
    created_at = {
        m: (by_debezium[m].header("created-at") or b"").decode() for m in expected.created_at
    }
    nulls = sum(v is None for m in by_debezium.values() for _, v in m.headers)
    ledger.append(
        Row(
            scenario="headers",
            created=total,
            delivered=len(by_debezium),
            seconds=time.monotonic() - started,
            notes=[
                f"{total} items compared; {len(problems)} differ beyond the documented "
                f"differences; {nulls} null-valued headers from Debezium",
            ],
            passed=not problems,
        )
    )
    assert created_at == expected.created_at
    assert not problems, "\n".join(f"{m}: {'; '.join(p)}" for m, p in problems.items())


async def custom_headers(service: DebeziumService) -> dict[str, dict[str, bytes]]:
    """Per message id, the item's own headers (besides the standard ones) as the worker sends
    them (text as is, numbers as digits)."""
    async with service.container.session_factory()() as session:
        rows = (await session.execute(select(OutboxItem.uuid, OutboxItem.headers))).all()
    return {
        str(message_id): {n: str(v).encode() for n, v in headers.items() if n not in STANDARD}
        for message_id, headers in rows
    }


async def _none_pending(service: DebeziumService) -> bool:
    return await service.pending() == 0
