"""When a partition counts as stuck: timeouts, how long, delivered since, a streak that stopped."""

from __future__ import annotations

import pytest

from outbox_engine.transports.kafka_stuck import StuckPartitions

from ..support import Clock


def test_two_timeouts_a_minute_apart_make_a_partition_stuck() -> None:
    clock = Clock()
    stuck = StuckPartitions(after_seconds=60.0, clock=clock)
    assert not stuck.watching
    stuck.timed_out("orders", 1)
    assert stuck.watching
    clock.now += 59.0
    stuck.timed_out("orders", 1)
    assert stuck.stuck() == []  # two timeouts, but 59 s since the first
    clock.now += 1.0
    assert stuck.stuck() == [("orders", 1)]


def test_one_timeout_is_not_enough_however_old() -> None:
    clock = Clock()
    stuck = StuckPartitions(after_seconds=60.0, clock=clock)
    stuck.timed_out("orders", 1)
    clock.now += 60.0
    assert stuck.stuck() == []
    assert stuck.watching  # the streak is 60 s old, not older: kept


def test_a_delivered_message_ends_the_streak_of_its_partition_only() -> None:
    clock = Clock()
    stuck = StuckPartitions(after_seconds=10.0, clock=clock)
    for partition in (0, 1, 2):
        stuck.timed_out("orders", partition)
    stuck.timed_out("payments", 0)
    clock.now += 10.0
    for partition in (0, 1, 2):
        stuck.timed_out("orders", partition)
    stuck.timed_out("payments", 0)
    stuck.delivered("orders", 1)
    stuck.delivered("invoices", 0)  # no streak: nothing to end
    assert stuck.stuck() == [("orders", 0), ("orders", 2), ("payments", 0)]


def test_a_streak_whose_last_timeout_is_old_is_forgotten() -> None:
    # Timeouts that stopped: the partition may simply have had nothing sent to it since.
    clock = Clock()
    stuck = StuckPartitions(after_seconds=10.0, clock=clock)
    stuck.timed_out("orders", 3)
    clock.now += 5.0
    stuck.timed_out("orders", 3)
    clock.now += 10.5
    assert stuck.stuck() == []
    assert not stuck.watching
    # A new streak starts from its own first timeout.
    stuck.timed_out("orders", 3)
    clock.now += 9.0
    stuck.timed_out("orders", 3)
    assert stuck.stuck() == []
    clock.now += 1.0
    assert stuck.stuck() == [("orders", 3)]


def test_an_unassigned_partition_is_not_watched() -> None:
    # -1: librdkafka never learnt the topic's partitions (an unknown topic, a cluster never
    # reached), which a new client would not change.
    clock = Clock()
    stuck = StuckPartitions(after_seconds=1.0, min_timeouts=1, clock=clock)
    stuck.timed_out("orders", -1)
    clock.now += 5.0
    assert not stuck.watching
    assert stuck.stuck() == []


def test_min_timeouts_and_forget() -> None:
    clock = Clock()
    stuck = StuckPartitions(after_seconds=1.0, min_timeouts=3, clock=clock)
    for _ in range(2):
        stuck.timed_out("orders", 0)
        clock.now += 0.6
    assert stuck.stuck() == []
    stuck.timed_out("orders", 0)
    assert stuck.stuck() == [("orders", 0)]
    stuck.forget()
    assert not stuck.watching
    assert stuck.stuck() == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"after_seconds": 0.0}, "after_seconds must be more than 0, not 0.0"),
        ({"min_timeouts": 0}, "min_timeouts must be 1 or more, not 0"),
    ],
)
def test_settings_out_of_range_are_refused(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        StuckPartitions(**kwargs)  # type: ignore[arg-type]
