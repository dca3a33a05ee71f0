"""The worker and consumer processes are built from options (relay/app.py, inbox/app.py):
what the options refuse, which boxes a consumer process takes, and what its probes say
before and after a poll loop stalls."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from outbox_engine.config.boxes import ConfigError
from outbox_engine.inbox.app import ConsumerApp, ConsumerOptions, inbox_boxes
from outbox_engine.relay.options import WorkerOptions

from ..support import INBOX_BOX, OUTBOX_BOX, make_registry


def test_worker_options_refuse_fewer_than_one_lane() -> None:
    with pytest.raises(ValueError, match="concurrency must be at least 1"):
        WorkerOptions(concurrency=0)
    assert WorkerOptions(concurrency=3).concurrency == 3


def test_a_consumer_process_takes_the_inbox_boxes_only() -> None:
    registry = make_registry()
    assert [b.name for b in inbox_boxes(registry)] == [
        b.name for b in registry if b.kind == "inbox"
    ]
    assert [b.name for b in inbox_boxes(registry, [INBOX_BOX])] == [INBOX_BOX]
    with pytest.raises(ConfigError, match="no inbox boxes to consume"):
        inbox_boxes(registry, [OUTBOX_BOX])


async def test_consumer_probes_name_what_is_missing_and_a_stalled_poll_loop() -> None:
    engine = create_async_engine("postgresql+asyncpg://nobody@127.0.0.1:1/none")
    options = ConsumerOptions(service_name="svc", boxes=(INBOX_BOX,), stall_seconds=30.0)
    app = ConsumerApp(make_registry(), engine, {"bootstrap.servers": "127.0.0.1:1"}, options)
    try:
        assert [c.box.name for c in app.consumers] == [INBOX_BOX]
        assert app.consumers[0].group_id == f"svc.{INBOX_BOX}"
        assert app.readiness() == (
            False,
            f"inbox {INBOX_BOX} not ready: not polling yet; Kafka: not checked yet; "
            "PostgreSQL: not checked yet",
        )
        # Never polled: not counted as stalled.
        assert app.liveness() == (True, "ok")
        now = asyncio.get_running_loop().time()
        app.consumers[0].last_poll = now - 29.0
        assert app.liveness() == (True, "ok")
        app.consumers[0].last_poll = now - 31.0
        assert app.liveness() == (False, f"consumers stalled: ['{INBOX_BOX}']")
    finally:
        await engine.dispose()
