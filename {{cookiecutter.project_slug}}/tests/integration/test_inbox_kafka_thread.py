"""Every call on the inbox consumer's Kafka client runs on its one thread, never two at once
(inbox/kafka_thread.py says why: a call from a second thread while `consume()` waits blocks
and burns CPU). The consumer runs on a real Kafka and PostgreSQL with its checks and lag
report due many times a second, its client watched call by call; and more consumers in one
process than the event loop's default executor has threads each keep a fetch waiting."""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from collections import Counter
from contextlib import AsyncExitStack
from typing import Any

import pytest
from confluent_kafka import Consumer, Message

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.inbox import consumer as consumer_module
from outbox_engine.inbox.consumer import InboxConsumer

from ..support import INBOX_BOX, make_registry, produce, wait_for
from .test_inbox import _count, running_consumer, stored

WATCHED = (
    "consume",
    "commit",
    "committed",
    "assignment",
    "list_topics",
    "get_watermark_offsets",
    "close",
)


class Watch:
    """Who called what, from which thread, and how many calls were ever in flight at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.threads: set[int] = set()
        self.in_flight = 0
        self.most_in_flight = 0

    def run(self, name: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            self.calls[name] += 1
            self.threads.add(threading.get_ident())
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            return call(*args, **kwargs)
        finally:
            with self.lock:
                self.in_flight -= 1


def watched_class(watch: Watch) -> type[Consumer]:
    """A Consumer whose WATCHED calls all go through `watch`."""

    def watched(name: str) -> Any:
        real = getattr(Consumer, name)

        def method(self: Consumer, *args: Any, **kwargs: Any) -> Any:
            return watch.run(name, real, self, *args, **kwargs)

        return method

    return type("WatchedConsumer", (Consumer,), {name: watched(name) for name in WATCHED})


async def test_fetch_commits_checks_lag_and_close_share_one_thread_one_call_at_a_time(
    container: Container, env_topics: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    watch = Watch()
    monkeypatch.setattr(consumer_module, "Consumer", watched_class(watch))
    box = make_registry().get(INBOX_BOX)
    topic = box.inbox_config.topics[0]
    bootstrap = container.settings().kafka_bootstrap_servers
    async with running_consumer(
        container,
        box,
        poll_timeout=0.3,
        lag_interval=0.2,
        health_interval=0.1,
        kafka_check_interval=0.2,
    ) as consumer:
        await asyncio.wait_for(consumer.ready.wait(), 60)
        for n in range(4):  # four batches apart: four commits, checks and lag between
            produce(
                bootstrap,
                topic,
                [
                    (str(i), b"{}", [("message-id", str(uuid.uuid4()).encode())])
                    for i in range(2 * n, 2 * n + 2)
                ],
            )

            async def stored_so_far(expected: int = 2 * n + 2) -> bool:
                return consumer.stored == expected

            await wait_for(stored_so_far, within=30)
            await consumer.flush()
            await asyncio.sleep(0.5)
    calls = watch.calls
    assert len(await stored(container)) == 8
    assert calls["commit"] >= 4, calls
    assert calls["list_topics"] >= 3, calls  # the Kafka check
    assert calls["assignment"] >= 3, calls  # the lag report
    assert calls["close"] == 1, calls
    assert watch.most_in_flight == 1, calls
    assert len(watch.threads) == 1
    assert threading.get_ident() not in watch.threads  # never the event loop's thread


async def test_every_consumer_keeps_a_fetch_waiting_however_many_share_the_process(
    container: Container, env_topics: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two more consumers than the event loop's default executor has threads
    (min(32, CPUs + 4)), each its own group on one topic: every one has its fetch waiting
    on Kafka at the same time (each on its own Kafka thread, inbox/kafka_thread.py), each
    reads the one message once, and it is stored once. (On the default executor the
    fetches queued: never more in flight than its threads.)"""
    box = make_registry().get(INBOX_BOX)
    topic = box.inbox_config.topics[0]
    count = min(32, (os.cpu_count() or 1) + 4) + 2
    produce(
        container.settings().kafka_bootstrap_servers,
        topic,
        [("1", b"{}", [("message-id", str(uuid.uuid4()).encode())])],
    )
    lock = threading.Lock()
    waiting = {"now": 0, "most": 0}
    real_take = consumer_module.take

    def counted_take(consumer: Consumer, size: int, timeout: float) -> list[Message]:
        with lock:
            waiting["now"] += 1
            waiting["most"] = max(waiting["most"], waiting["now"])
        try:
            return real_take(consumer, size, timeout)
        finally:
            with lock:
                waiting["now"] -= 1

    monkeypatch.setattr(consumer_module, "take", counted_take)

    async def all_waiting() -> bool:
        return waiting["most"] == count

    async with AsyncExitStack() as stack:
        consumers = [
            await stack.enter_async_context(running_consumer(container, box)) for _ in range(count)
        ]
        await wait_for(lambda: _count(container, 1), within=60)
        for consumer in consumers:
            await wait_for(lambda c=consumer: _received(c, 1), within=60)  # type: ignore[misc]
        await wait_for(all_waiting, within=30)
        for consumer in consumers:  # its checks of Kafka and PostgreSQL ran too
            await asyncio.wait_for(consumer.ready.wait(), 30)
    assert waiting == {"now": 0, "most": count}
    assert [c.received for c in consumers] == [1] * count
    assert sum(c.stored for c in consumers) == 1
    assert len(await stored(container)) == 1


async def _received(consumer: InboxConsumer, expected: int) -> bool:
    return consumer.received == expected
