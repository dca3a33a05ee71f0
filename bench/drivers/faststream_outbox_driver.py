"""Driver for `faststream-outbox` (runs in its own venv): schema, fill, paced load, relay.

The relay is the package's documented shape: an `OutboxBroker` subscriber on the outbox
queue stacked under a publisher of FastStream's confluent `KafkaBroker`. The handler
returns a `KafkaResponse` so that the Kafka key is the item's key. Knobs (see
docs/benchmarks.md): fetch_batch_size 500, max_workers 16, terminal_flush_batch_size 100,
min_fetch_interval 0.05 s, LISTEN/NOTIFY (asyncpg), log level WARNING; producer acks=all,
idempotence on, linger 1 ms.
"""

from __future__ import annotations

import argparse
import logging
import os
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
from sqlalchemy import MetaData
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

QUEUE = "bench"


def _setup() -> tuple[Any, Any, Any, Any]:
    from faststream_outbox import OutboxBroker, make_outbox_table

    metadata = MetaData()
    table = make_outbox_table(metadata, table_name="fs_outbox")
    engine = create_async_engine(sqlalchemy_url(), pool_size=20, max_overflow=10)
    # Per-message INFO logs would cost it more than the relay work: log warnings only.
    broker = OutboxBroker(engine, outbox_table=table, log_level=logging.WARNING)
    return metadata, engine, broker, async_sessionmaker(engine, expire_on_commit=False)


async def schema(_args: argparse.Namespace) -> None:
    metadata, engine, _broker, _sessions = _setup()
    async with engine.begin() as conn:
        await conn.run_sync(metadata.create_all)
    await engine.dispose()


async def fill(args: argparse.Namespace) -> None:
    _metadata, engine, broker, sessions = _setup()
    for seqs in chunks(args.start, args.count, 1000):
        async with sessions() as session, session.begin():
            await broker.publish_batch(
                *(body(s, args.keys, args.size) for s in seqs), queue=QUEUE, session=session
            )
    await engine.dispose()


async def load(args: argparse.Namespace) -> None:
    _metadata, engine, broker, sessions = _setup()

    async def commit(seqs: range) -> None:
        async with sessions() as session, session.begin():
            if len(seqs) == 1:
                await broker.publish(
                    body(seqs[0], args.keys, args.size), queue=QUEUE, session=session
                )
            else:
                await broker.publish_batch(
                    *(body(s, args.keys, args.size) for s in seqs), queue=QUEUE, session=session
                )

    await paced_load(args, commit)
    await engine.dispose()


async def relay(args: argparse.Namespace) -> None:
    from faststream.confluent import KafkaBroker, KafkaResponse

    _metadata, engine, broker, _sessions = _setup()
    kafka = KafkaBroker(
        os.environ["KAFKA_BOOTSTRAP_SERVERS"],
        acks="all",
        enable_idempotence=True,
        linger_ms=1,
        log_level=logging.WARNING,
    )
    publisher = kafka.publisher(args.topic)

    @publisher
    @broker.subscriber(
        QUEUE,
        fetch_batch_size=500,
        max_workers=16,
        terminal_flush_batch_size=100,
        min_fetch_interval=0.05,
        max_fetch_interval=1.0,
    )
    async def forward(message: dict[str, Any]) -> KafkaResponse:
        return KafkaResponse(message, key=key_of(int(message["bench_seq"]), args.keys).encode())

    stopping = stop_event()
    await kafka.start()
    await broker.start()
    await stopping.wait()
    await broker.stop()
    await kafka.stop()
    await engine.dispose()


async def create_cost(args: argparse.Namespace) -> None:
    """One-row business transactions without and with one `broker.publish(..., session=)`."""
    from sqlalchemy import text

    _metadata, engine, broker, sessions = _setup()
    async with engine.begin() as conn:
        await conn.execute(text(ORDERS_DDL))
    insert_order = text(
        "INSERT INTO bench_orders (customer_id, amount) VALUES (:c, 12.5) RETURNING id"
    )
    document = body(0, args.keys, args.size)
    async with sessions() as session:

        async def transaction(with_create: bool, n: int) -> None:
            async with session.begin():
                await session.execute(insert_order, {"c": f"c-{n}"})
                if with_create:
                    await broker.publish(document, queue=QUEUE, session=session)

        await create_cost_rounds(args, transaction)
    await engine.dispose()


def main() -> None:
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
