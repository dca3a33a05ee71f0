from __future__ import annotations

import random

from outbox_engine.config.boxes import BackoffConfig
from outbox_engine.relay.retry import backoff_delay, decide

from ..support import make_registry


def test_backoff_grows_by_the_multiplier_without_jitter() -> None:
    config = BackoffConfig(min_seconds=1, max_seconds=60, multiplier=2, jitter=0)
    assert [backoff_delay(config, n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]


def test_jittered_backoff_stays_within_min_and_max() -> None:
    config = BackoffConfig(min_seconds=0.5, max_seconds=30, multiplier=3, jitter=0.5)
    rng = random.Random(7)
    delays = [backoff_delay(config, n, rng) for n in range(1, 30) for _ in range(50)]
    assert min(delays) >= 0.5
    assert max(delays) <= 30
    assert len({round(d, 6) for d in delays}) > 100  # jitter spreads retries apart


def test_max_retries_then_failed() -> None:
    box = make_registry(outbox={"max_retries": 2}).get("{{ cookiecutter.outbox_item }}_outbox_item")
    decisions = [decide(box.config, previous, permanent=False) for previous in range(3)]
    assert [d.errors_count for d in decisions] == [1, 2, 3]
    assert [d.give_up for d in decisions] == [False, False, True]
    assert decide(box.config, 0, permanent=True).give_up is True


def test_without_backoff_a_failed_item_waits_one_poll_interval() -> None:
    registry = make_registry(outbox={"retry_strategies": [], "poll_interval": 0.25})
    decision = decide(registry.get("{{ cookiecutter.outbox_item }}_outbox_item").config, 0, permanent=False)
    assert decision.delay_seconds == 0.25
