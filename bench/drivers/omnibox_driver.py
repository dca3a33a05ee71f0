"""Driver for `omni-box` (runs in its own venv): schema, fill, paced load, relay.

The relay is its documented outbox publisher loop: in a transaction of its own,
`OutboxPublisher(PostgresOutboxRepository(session), KafkaEventPublisher(...))
.publish_batch(batch_size=500)`, sleeping 50 ms when there was nothing to do (omni-box has
no NOTIFY wake-up). Two such loops run per process (the same two lanes our worker runs).
The Kafka adapter is omni-box's own (aiokafka), with acks=all, idempotence on, linger 1 ms,
and `RawEventConverter` so that the message value is the same ~1 KB document. The rows name
a placeholder topic (the backlog is written once and copied per run); `TopicRedirect` sends
to the run's topic.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import uuid
from typing import Any

from common import (
    ORDERS_DDL,
    body,
    chunks,
    create_cost_rounds,
    key_of,
    paced_load,
    run_driver,
    sqlalchemy_url,
    stop_event,
)
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase

LOOPS = 2
BATCH = 500
IDLE_SLEEP = 0.05


class Base(DeclarativeBase):
    pass


def _model() -> type[Any]:
    from omni_box.infra.storage.postgres.orm import OutboxEventDBBase

    class OutboxEventDB(OutboxEventDBBase, Base):
        pass

    return OutboxEventDB


MODEL = _model()


def _sessions() -> tuple[Any, Any]:
    engine = create_async_engine(sqlalchemy_url(), pool_size=10)
    return engine, async_sessionmaker(engine, expire_on_commit=False)


def _events(domain: Any, seqs: range, args: argparse.Namespace, topic: str) -> list[Any]:
    return [
        domain.create_outbox_event(
            aggregate_type="order",
            aggregate_id=uuid.uuid4(),
            event_type="bench_event",
            topic=topic,
            partition_key=key_of(seq, args.keys),
            payload=body(seq, args.keys, args.size),
        )
        for seq in seqs
    ]


async def schema(_args: argparse.Namespace) -> None:
    engine, _ = _sessions()
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    await engine.dispose()


async def fill(args: argparse.Namespace) -> None:
    from omni_box import OmniBoxDomainService
    from omni_box.infra.storage.postgres import PostgresOutboxRepository

    domain = OmniBoxDomainService()
    engine, sessions = _sessions()
    for seqs in chunks(args.start, args.count, 1000):
        async with sessions() as session, session.begin():
            repo = PostgresOutboxRepository(session, model_class=MODEL)
            await repo.bulk_create(_events(domain, seqs, args, args.topic))
    await engine.dispose()


async def load(args: argparse.Namespace) -> None:
    from omni_box import OmniBoxDomainService
    from omni_box.infra.storage.postgres import PostgresOutboxRepository

    domain = OmniBoxDomainService()
    engine, sessions = _sessions()

    async def commit(seqs: range) -> None:
        async with sessions() as session, session.begin():
            repo = PostgresOutboxRepository(session, model_class=MODEL)
            events = _events(domain, seqs, args, args.topic)
            if len(events) == 1:
                await repo.create(events[0])
            else:
                await repo.bulk_create(events)

    await paced_load(args, commit)
    await engine.dispose()


class TopicRedirect:
    """The producer, sending to this run's topic: the backlog is written once (with a
    placeholder topic in its rows) and copied for every run."""

    def __init__(self, producer: Any, topic: str) -> None:
        self._producer = producer
        self._topic = topic

    @property
    def client(self) -> Any:
        return self._producer.client

    async def send_and_wait(self, topic: str, **kwargs: Any) -> Any:
        return await self._producer.send_and_wait(topic=self._topic, **kwargs)


async def relay(args: argparse.Namespace) -> None:
    from aiokafka import AIOKafkaProducer
    from omni_box import OutboxPublisher
    from omni_box.core.converters import RawEventConverter
    from omni_box.infra.brokers.kafka import KafkaEventPublisher
    from omni_box.infra.storage.postgres import PostgresOutboxRepository

    producer = AIOKafkaProducer(
        bootstrap_servers=os.environ["KAFKA_BOOTSTRAP_SERVERS"],
        acks="all",
        enable_idempotence=True,
        linger_ms=1,
    )
    await producer.start()
    broker = KafkaEventPublisher(
        producer=TopicRedirect(producer, args.topic), converter=RawEventConverter()
    )
    engine, sessions = _sessions()
    stopping = stop_event()
    worker = os.environ.get("BENCH_WORKER", "0/1").replace("/", "-")

    async def loop(lane: int) -> None:
        while not stopping.is_set():
            async with sessions() as session, session.begin():
                repo = PostgresOutboxRepository(session, model_class=MODEL)
                result = await OutboxPublisher(repo, broker).publish_batch(
                    worker_id=f"bench-{worker}-{lane}", batch_size=BATCH
                )
            if not result.processed_event_ids:
                await asyncio.sleep(IDLE_SLEEP)

    await asyncio.gather(*(loop(lane) for lane in range(LOOPS)))
    await producer.stop()
    await engine.dispose()


async def create_cost(args: argparse.Namespace) -> None:
    """One-row business transactions without and with one `repo.create(event)`."""
    from omni_box import OmniBoxDomainService
    from omni_box.infra.storage.postgres import PostgresOutboxRepository
    from sqlalchemy import text

    domain = OmniBoxDomainService()
    engine, sessions = _sessions()
    async with engine.begin() as conn:
        await conn.execute(text(ORDERS_DDL))
    insert_order = text(
        "INSERT INTO bench_orders (customer_id, amount) VALUES (:c, 12.5) RETURNING id"
    )
    async with sessions() as session:

        async def transaction(with_create: bool, n: int) -> None:
            async with session.begin():
                order_id = (await session.execute(insert_order, {"c": f"c-{n}"})).scalar_one()
                if with_create:
                    repo = PostgresOutboxRepository(session, model_class=MODEL)
                    event = _events(domain, range(order_id, order_id + 1), args, args.topic)[0]
                    await repo.create(event)

        await create_cost_rounds(args, transaction)
    await engine.dispose()


def main() -> None:
    import structlog

    # omni-box logs through structlog, whose default prints every level (a debug line per
    # created event): warnings only, as for every system here.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    logging.basicConfig(level=logging.WARNING)
    run_driver(
        {
            "schema": schema,
            "fill": fill,
            "load": load,
            "relay": relay,
            "create-cost": create_cost,
        }
    )


if __name__ == "__main__":
    main()
