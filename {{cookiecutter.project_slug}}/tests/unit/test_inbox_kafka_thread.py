"""The inbox consumer's Kafka thread (inbox/kafka_thread.py): calls run in the order handed
over, one at a time, on one thread that is not the event loop's; after close() a new one."""

from __future__ import annotations

import asyncio
import random
import threading
import time

import pytest

from outbox_engine.inbox.kafka_thread import ConsumerThread


async def test_calls_run_in_the_order_given_one_at_a_time_on_one_thread() -> None:
    thread = ConsumerThread("test")
    ran: list[int] = []
    threads: set[int] = set()
    busy = {"now": 0, "most": 0}

    def call(n: int) -> int:
        busy["now"] += 1
        busy["most"] = max(busy["most"], busy["now"])
        threads.add(threading.get_ident())
        time.sleep(random.uniform(0, 0.003))
        ran.append(n)
        busy["now"] -= 1
        return n * 2

    try:
        # Handed over without waiting, awaited in reverse: the order is the handing over's.
        futures = [thread.call(call, n) for n in range(50)]
        results = [await future for future in reversed(futures)]
    finally:
        thread.close()
    assert ran == list(range(50))
    assert results == [n * 2 for n in reversed(range(50))]
    assert busy["most"] == 1
    assert len(threads) == 1
    assert threading.get_ident() not in threads


async def test_an_error_reaches_its_caller_and_the_next_calls_still_run() -> None:
    thread = ConsumerThread("test")

    def fail() -> None:
        raise RuntimeError("broker said no")

    try:
        failing = thread.call(fail)
        after = thread.call(lambda: "ran")
        with pytest.raises(RuntimeError, match="broker said no"):
            await failing
        assert await after == "ran"
    finally:
        thread.close()


async def test_after_close_the_next_call_starts_a_new_thread() -> None:
    thread = ConsumerThread("test")
    first = await thread.call(threading.current_thread)
    assert await thread.call(threading.current_thread) is first
    thread.close()
    thread.close()  # twice is harmless
    second = await thread.call(threading.current_thread)
    thread.close()
    assert second is not first
    assert first.name.startswith("kafka-test")
    assert second.name.startswith("kafka-test")
    await asyncio.to_thread(first.join, 5)
    assert not first.is_alive()  # closed: its thread ended
