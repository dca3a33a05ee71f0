"""Every call on the inbox consumer's Kafka client runs on its one thread, never two at once
(inbox/kafka_thread.py says why: a call from a second thread while `consume()` waits blocks
and burns CPU). The consumer runs on a real Kafka and PostgreSQL with its checks and lag
report due many times a second, its client watched call by call."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Consumer

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.inbox import consumer as consumer_module
from outbox_engine.inbox.consumer import InboxConsumer

from ..support import INBOX_BOX, make_registry, produce, wait_for
from .test_inbox import stored

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


WATCH = Watch()


class WatchedConsumer(Consumer):
    pass


def _watched(name: str) -> Any:
    real = getattr(Consumer, name)

    def method(self: Consumer, *args: Any, **kwargs: Any) -> Any:
        return WATCH.run(name, real, self, *args, **kwargs)

    return method


for _name in WATCHED:
    setattr(WatchedConsumer, _name, _watched(_name))


async def test_fetch_commits_checks_lag_and_close_share_one_thread_one_call_at_a_time(
    container: Container, env_topics: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    global WATCH
    WATCH = Watch()
    monkeypatch.setattr(consumer_module, "Consumer", WatchedConsumer)
    box = make_registry().get(INBOX_BOX)
    topic = box.inbox_config.topics[0]
    bootstrap = container.settings().kafka_bootstrap_servers
    consumer = InboxConsumer(
        box,
        container.engine(),
        container.settings().kafka_config(),
        f"test-{uuid.uuid4().hex[:8]}",
        poll_timeout=0.3,
        observer=container.observer(),
        lag_interval=0.2,
        health_interval=0.1,
        kafka_check_interval=0.2,
    )
    task = asyncio.create_task(consumer.run())
    try:
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
    finally:
        consumer.stop()
        await asyncio.wait_for(task, 30)
    calls = WATCH.calls
    assert len(await stored(container)) == 8
    assert calls["commit"] >= 4, calls
    assert calls["list_topics"] >= 3, calls  # the Kafka check
    assert calls["assignment"] >= 3, calls  # the lag report
    assert calls["close"] == 1, calls
    assert WATCH.most_in_flight == 1, calls
    assert len(WATCH.threads) == 1
    assert threading.get_ident() not in WATCH.threads  # never the event loop's thread
