"""Driver for the baked project with its outbox box relayed by Debezium (runs in its venv):
the same fill, load and create-cost as drivers/ours.py, plus `debezium-up` and
`debezium-down`, both through the engine's own API (`outbox_engine.debezium`).

debezium-up: the run's publication and replication slot, the connector registered on Kafka
Connect (CONNECT_URL) until it and its task run, the slot streaming, then the box switched
to Debezium (`switch_to_debezium`): one transaction copies every pending item (a drain's
backlog) into the capture table in id order and installs the capture trigger, so every
item created later is captured as it is inserted. Prints one JSON line: the wall-clock time
the switch had committed, and how many items it handed over.

debezium-down: deletes the connector, then drops the slot (a slot left behind keeps WAL on
the shared server forever). The names are the run's own (`--names`), never the service's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

from common import run_driver
from ours import _wiring, create_cost, fill, load

SLOT_TIMEOUT_S = 60.0


def _names(args: argparse.Namespace) -> Any:
    from outbox_engine.debezium.connector import DebeziumNames

    base: str = args.names
    return DebeziumNames(
        connector=base.replace("_", "-"), slot=base, publication=base, topic_prefix=base
    )


async def debezium_up(args: argparse.Namespace) -> None:
    from outbox_engine.debezium.connector import connector_config
    from outbox_engine.debezium.register import register
    from outbox_engine.debezium.switch import switch_to_debezium
    from outbox_engine.store import slots

    container, _outbox, _sessions, _item_class = _wiring(args.box)
    engine = container.engine()
    names = _names(args)
    config = connector_config(names, os.environ["DATABASE_URL"])
    registration = await register(engine, os.environ["CONNECT_URL"], names, config, 120.0)
    started = time.monotonic()
    while True:  # the task runs; wait until its WAL sender streams from the slot
        async with engine.connect() as conn:
            state = await slots.slot_state(conn, names.slot)
        if state.active:
            break
        if time.monotonic() - started > SLOT_TIMEOUT_S:
            raise RuntimeError(f"slot {state} not streaming after {SLOT_TIMEOUT_S:.0f} s")
        await asyncio.sleep(0.2)
    box = container.registry().get(args.box)
    switch_started = time.monotonic()
    report = await switch_to_debezium(engine, box, names)
    committed_at = time.time()
    switch_s = time.monotonic() - switch_started
    print(
        json.dumps(
            {
                "committed_at": committed_at,
                "copied": report.copied,
                "register_s": registration.seconds,
                "streaming_s": switch_started - started,
                "switch_s": switch_s,
            }
        ),
        flush=True,
    )
    await engine.dispose()


async def debezium_down(args: argparse.Namespace) -> None:
    from outbox_engine.debezium.register import unregister
    from outbox_engine.store import slots

    container, _outbox, _sessions, _item_class = _wiring(args.box)
    engine = container.engine()
    names = _names(args)
    deleted = await unregister(os.environ["CONNECT_URL"], names.connector)
    dropped = await slots.drop_slot(engine, names.slot, timeout_s=60.0)
    print(json.dumps({"connector_deleted": deleted, "slot_dropped": dropped}), flush=True)
    await engine.dispose()


def _args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--box", default="order_outbox_item")
    parser.add_argument("--names", default="", help="the run's slot, publication, connector")


def main() -> None:
    run_driver(
        {
            "fill": fill,
            "load": load,
            "create-cost": create_cost,
            "debezium-up": debezium_up,
            "debezium-down": debezium_down,
        },
        _args,
    )


if __name__ == "__main__":
    main()
