from __future__ import annotations

import asyncio

from outbox_engine.creation.items import _wake_payload
from outbox_engine.relay.lanes import lanes_to_wake
from outbox_engine.relay.pacing import Pacer, Pulse


def test_a_payload_wakes_only_the_lanes_of_its_buckets() -> None:
    # Lane i works the buckets b with b % concurrency == i.
    assert lanes_to_wake("3,7,12", 2) == {0, 1}
    assert lanes_to_wake("3,7,11", 2) == {1}
    assert lanes_to_wake("4", 4) == {0}
    assert lanes_to_wake("5,9,13", 4) == {1}


def test_an_empty_or_foreign_payload_wakes_every_lane() -> None:
    assert lanes_to_wake("", 2) is None
    assert lanes_to_wake("hello", 2) is None
    assert lanes_to_wake("1,,2", 2) is None


def test_create_names_each_bucket_once_and_gives_up_naming_beyond_64() -> None:
    assert _wake_payload([7, 3, 7, 12, 3]) == "3,7,12"
    assert lanes_to_wake(_wake_payload([7, 3, 7, 12, 3]), 2) == {0, 1}
    assert _wake_payload(list(range(64))) == ",".join(str(b) for b in range(64))
    assert _wake_payload(list(range(65))) == ""


async def test_a_pulse_ends_the_sleeps_waiting_when_it_fires_and_no_later_one() -> None:
    pacer, pulse = Pacer(), Pulse()
    loop = asyncio.get_running_loop()
    start = loop.time()
    sleeps = [asyncio.ensure_future(pacer.sleep(30.0, pulse.event())) for _ in range(3)]
    await asyncio.sleep(0.05)
    assert [s.done() for s in sleeps] == [False, False, False]
    pulse.fire()
    await asyncio.wait_for(asyncio.gather(*sleeps), 5.0)
    assert loop.time() - start < 5.0
    # A sleep that starts after the pulse runs its time: a pulse is not a state.
    start = loop.time()
    await pacer.sleep(0.3, pulse.event())
    assert loop.time() - start >= 0.29
    assert pulse.fired == 1
