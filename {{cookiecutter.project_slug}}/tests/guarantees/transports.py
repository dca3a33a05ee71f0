"""The transports of the guarantees scenarios, configured in each scenario's boxes file and
loaded by the service's own worker and consumer processes.

* `EffectHandler` is the inbox handler: one row in `guarantee_effects` per handled message,
  written in the transaction that marks the item delivered, so an effect that happens twice
  is counted twice.
* `ScriptedKafkaTransport` relays to Kafka one item at a time and misbehaves on the first
  attempt of chosen items (by id): slower than the box's `transport_timeout_seconds`, or an
  error. Retries behave normally, so every item must still arrive.
"""

from __future__ import annotations

import asyncio

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from outbox_engine.transports.base import InboxHandler, ItemRecord, Transport
from outbox_engine.transports.builtin import KafkaTransport
from outbox_engine.transports.resources import Resources

EFFECTS_TABLE = "guarantee_effects"
CREATE_EFFECTS_TABLE = (
    f"CREATE TABLE IF NOT EXISTS {EFFECTS_TABLE} "
    "(id bigserial PRIMARY KEY, message_id uuid NOT NULL)"
)


class EffectHandler(InboxHandler):
    """Records one effect per handled message (no unique constraint: duplicates show)."""

    async def handle(self, item: ItemRecord, payload: bytes, session: AsyncSession) -> bool:
        await session.execute(
            text(f"INSERT INTO {EFFECTS_TABLE} (message_id) VALUES (:message_id)"),
            {"message_id": item.uuid},
        )
        return True


class ScriptedKafkaTransport(Transport):
    """Kafka without pipelining; on an item's first attempt, every `slow_every`-th id waits
    `slow_seconds` before producing and every `fail_every`-th id raises."""

    def __init__(
        self, topic: str, slow_every: int = 0, slow_seconds: float = 0.0, fail_every: int = 0
    ) -> None:
        self.kafka = KafkaTransport(topic)
        self.slow_every = slow_every
        self.slow_seconds = slow_seconds
        self.fail_every = fail_every

    async def setup(self, resources: Resources) -> None:
        await self.kafka.setup(resources)

    async def __call__(self, item: ItemRecord, payload: bytes) -> bool:
        first = item.errors_count == 0
        if first and self.slow_every and item.id % self.slow_every == 0:
            await asyncio.sleep(self.slow_seconds)
        if first and self.fail_every and item.id % self.fail_every == 0:
            raise RuntimeError("scripted first-attempt failure (guarantees suite)")
        await self.kafka.enqueue(item, payload)
        return True
