"""Driver for the baked project (runs in its venv): fill a backlog, paced load, create() cost.

The relay and the inbox consumer are the project's own console script (`<slug> worker`,
`<slug> consumer`); this driver only writes items through the public create API.
"""

from __future__ import annotations

import argparse
from typing import Any

from common import (
    EVENT_NAME,
    ORDERS_DDL,
    chunks,
    create_cost_rounds,
    key_of,
    paced_load,
    payload,
    run_driver,
)
from sqlalchemy import text


def _wiring(box_name: str) -> tuple[Any, Any, Any, type[Any]]:
    import importlib

    module = importlib.import_module(f"{_package()}.container")
    container = module.Container()
    box = container.registry().get(box_name)
    return container, container.outbox(), container.session_factory(), box.item_class


def _package() -> str:
    import os

    return os.environ["BENCH_PACKAGE"]


def _items(seqs: range, args: argparse.Namespace) -> list[dict[str, Any]]:
    return [
        {
            "event_key": key_of(seq, args.keys),
            "event_name": EVENT_NAME,
            "payload": payload(seq, args.keys, args.size),
        }
        for seq in seqs
    ]


async def fill(args: argparse.Namespace) -> None:
    container, outbox, sessions, item_class = _wiring(args.box)
    for seqs in chunks(args.start, args.count, 1000):
        async with sessions() as session, session.begin():
            await outbox.create_batch(session, item_class, _items(seqs, args))
    await container.engine().dispose()


async def load(args: argparse.Namespace) -> None:
    container, outbox, sessions, item_class = _wiring(args.box)

    async def commit(seqs: range) -> None:
        async with sessions() as session, session.begin():
            if len(seqs) == 1:
                seq = seqs[0]
                await outbox.create(
                    session,
                    item_class,
                    event_key=key_of(seq, args.keys),
                    event_name=EVENT_NAME,
                    payload=payload(seq, args.keys, args.size),
                )
            else:
                await outbox.create_batch(session, item_class, _items(seqs, args))

    await paced_load(args, commit)
    await container.engine().dispose()


INSERT_ORDER = text("INSERT INTO bench_orders (customer_id, amount) VALUES (:c, :a) RETURNING id")


async def create_cost(args: argparse.Namespace) -> None:
    """One-row business transactions without and with one `create()` on one session."""
    container, outbox, sessions, item_class = _wiring(args.box)
    async with container.engine().begin() as conn:
        await conn.execute(text(ORDERS_DDL))
    body = payload(0, args.keys, args.size)
    async with sessions() as session:

        async def transaction(with_create: bool, n: int) -> None:
            async with session.begin():
                order_id = (
                    await session.execute(INSERT_ORDER, {"c": f"c-{n}", "a": 12.5})
                ).scalar_one()
                if with_create:
                    await outbox.create(
                        session,
                        item_class,
                        event_key=str(order_id),
                        event_name=EVENT_NAME,
                        payload=body,
                    )

        await create_cost_rounds(args, transaction)
    await container.engine().dispose()


def _box_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--box", default="order_outbox_item")


def main() -> None:
    run_driver({"fill": fill, "load": load, "create-cost": create_cost}, _box_arg)


if __name__ == "__main__":
    main()
