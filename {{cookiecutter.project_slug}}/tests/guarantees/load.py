"""The load of a scenario: outbox items from the test's own transactions (a sequence number
per key, to check order), orders through the api process (with the example domain), and
inbox messages produced to Kafka (10% of them twice), spread over `Load.seconds` so that a
fault lands mid-stream. What the generators saw goes in `Stats`."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from {{ cookiecutter.package_name }}.container import Container

from ..support import OutboxItem, produce

EXAMPLE_DOMAIN = {{ "True" if cookiecutter.include_example_domain else "False" }}


@dataclass(frozen=True)
class Load:
    """How much each scenario writes: `keys` x `per_key` outbox items from the test's own
    transactions (a sequence number per key), `orders` through the api when the example
    domain is baked in, and `inbox` distinct messages (plus 10% sent twice), produced in
    `inbox_chunks` equal chunks spread over `seconds`."""

    keys: int = 20
    per_key: int = 100
    writers: int = 5
    orders: int = 200
    inbox: int = 1500
    inbox_chunks: int = 5
    seconds: float = 6.0  # the load is spread over this long, so faults land mid-stream

    @property
    def items(self) -> int:
        return self.keys * self.per_key


@dataclass
class Stats:
    """What the load generators saw."""

    rejected_writes: int = 0
    api_created: int = 0
    api_errors: list[tuple[int, str]] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)


def _reason(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    code = getattr(orig, "sqlstate", None) or getattr(exc, "code", None)
    return f"{type(exc).__name__}{f' {code}' if code else ''}"


async def write_sequences(container: Container, load: Load, stats: Stats) -> None:
    """The business transactions of the scenario: per key, items with `seq` 0, 1, 2 ...
    committed one transaction at a time; a rejected transaction is retried."""
    outbox = container.outbox()
    pause = load.seconds / load.per_key

    async def writer(index: int) -> None:
        keys = range(index, load.keys, load.writers)
        for seq in range(load.per_key):
            batch = [
                {"event_key": f"k{key}", "event_name": "seq", "payload": {"seq": seq}}
                for key in keys
            ]
            while True:
                try:
                    async with container.session_factory()() as session, session.begin():
                        await outbox.create_batch(session, OutboxItem, batch)
                    break
                except Exception as exc:  # the scenario's fault, retried like a client would
                    stats.rejected_writes += 1
                    stats.errors[_reason(exc)] += 1
                    await asyncio.sleep(0.2)
            await asyncio.sleep(pause)

    await asyncio.gather(*(writer(i) for i in range(load.writers)))


async def post_orders(api_url: str, load: Load, stats: Stats) -> None:
    """Orders through the api process (each commits an order and its outbox item)."""
    if not EXAMPLE_DOMAIN or not load.orders:
        return
    pause = load.seconds / load.orders * 4
    async with httpx.AsyncClient(base_url=api_url, timeout=30.0) as client:

        async def poster(index: int) -> None:
            for n in range(index, load.orders, 4):
                try:
                    response = await client.post(
                        "/orders", json={"customer_id": f"g{n}", "amount": "10.00"}
                    )
                except httpx.HTTPError as exc:
                    stats.api_errors.append((0, f"{type(exc).__name__}: {exc}"))
                else:
                    if response.status_code == 201:
                        stats.api_created += 1
                    else:
                        stats.api_errors.append((response.status_code, response.text[:300]))
                await asyncio.sleep(pause)

        await asyncio.gather(*(poster(i) for i in range(4)))


def inbox_messages(
    count: int,
) -> tuple[list[str], list[tuple[str, bytes, list[tuple[str, bytes]]]]]:
    ids = [str(uuid.uuid4()) for _ in range(count)]
    messages = [
        (f"p{i % 40}", json.dumps({"n": i}).encode(), [("message-id", mid.encode())])
        for i, mid in enumerate(ids)
    ]
    return ids, messages + messages[::10]  # 10% redelivered by the producer side


def produce_chunk(bootstrap: str, topic: str, chunk: list[Any]) -> None:
    """Produce and wait for every acknowledgement (long enough to outlast a broker outage)."""
    produce(bootstrap, topic, chunk, flush_seconds=240)


async def produce_inbox(bootstrap: str, topic: str, messages: list[Any], load: Load) -> None:
    size = -(-len(messages) // load.inbox_chunks)
    for start in range(0, len(messages), size):
        await asyncio.to_thread(produce_chunk, bootstrap, topic, messages[start : start + size])
        await asyncio.sleep(load.seconds / load.inbox_chunks)
