from __future__ import annotations

import asyncio
import contextlib

from outbox_engine.creation.items import _wake_payload
from outbox_engine.relay.lanes import lanes_to_wake
from outbox_engine.relay.pacing import Flag, Pacer, Pulse


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


async def _turns(count: int) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


async def test_a_flag_ends_a_sleep_without_a_task_of_its_own() -> None:
    """The lanes' sleep between batches: one future and one timer, no task per event (the
    tasks, `asyncio.wait` and their cancellation cost some ten turns of the loop a batch)."""
    pacer, wake = Pacer(), Flag()
    loop = asyncio.get_running_loop()
    before = len(asyncio.all_tasks())
    sleep = asyncio.ensure_future(pacer.sleep(30.0, wake))
    await _turns(3)
    assert len(asyncio.all_tasks()) == before + 1  # the sleep itself, nothing more
    assert not sleep.done()
    start = loop.time()
    wake.set()
    await asyncio.wait_for(sleep, 1.0)
    assert loop.time() - start < 0.1
    assert (wake._sleepers, pacer.stopping._sleepers) == (set(), set())


async def test_a_sleep_runs_its_time_and_ends_on_stop() -> None:
    pacer, wake = Pacer(), Flag()
    loop = asyncio.get_running_loop()
    start = loop.time()
    await pacer.sleep(0.2, wake)
    assert 0.19 <= loop.time() - start < 1.0
    sleeps = [asyncio.ensure_future(pacer.sleep(30.0, w)) for w in (wake, None)]
    await _turns(2)
    pacer.stop()
    await asyncio.wait_for(asyncio.gather(*sleeps), 1.0)
    assert pacer.stopped
    assert wake._sleepers == set()


async def test_a_flag_set_before_the_sleep_ends_it_after_one_turn_of_the_loop() -> None:
    """What a lane whose NOTIFY came during its batch sees: no wait, but the loop runs the
    other tasks once (a lane that always finds work must not starve them)."""
    pacer, wake = Pacer(), Flag()
    wake.set()
    ran: list[str] = []

    async def other() -> None:
        ran.append("other")

    task = asyncio.ensure_future(other())
    await pacer.sleep(30.0, wake)
    assert ran == ["other"]
    assert task.done()


async def test_a_cancelled_sleep_leaves_no_sleeper_behind() -> None:
    pacer, wake = Pacer(), Flag()
    sleep = asyncio.ensure_future(pacer.sleep(30.0, wake))
    await _turns(2)
    assert len(wake._sleepers) == 1
    sleep.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await sleep
    assert sleep.cancelled()
    assert (wake._sleepers, pacer.stopping._sleepers) == (set(), set())
    wake.set()  # nothing left to wake: no error
