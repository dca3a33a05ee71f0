"""The one Outcome: each decision made once, read the same by recording, metrics and flush."""

from __future__ import annotations

from outbox_engine.relay.outcomes import (
    DEFERRED,
    DELIVERED,
    Decision,
    discarded,
    failed,
    from_row,
    pending,
    unavailable,
)
from outbox_engine.store.status import ItemStatus

from ..support import OUTBOX_BOX, make_registry


def test_a_failed_attempt_retries_until_max_retries_then_is_dead() -> None:
    settings = {
        "max_retries": 2,
        "retry_strategies": ["exponential_backoff"],
        "backoff": {"min_seconds": 3, "max_seconds": 3},
    }
    config = make_registry(outbox=settings).get(OUTBOX_BOX).config
    outcomes = [failed(config, before, "boom", permanent=False) for before in range(3)]
    assert [o.decision for o in outcomes] == [Decision.RETRY, Decision.RETRY, Decision.DEAD]
    assert [o.errors_count for o in outcomes] == [1, 2, 3]
    assert [o.item_status() for o in outcomes] == [
        ItemStatus.PENDING,
        ItemStatus.PENDING,
        ItemStatus.FAILED,
    ]
    assert outcomes[0].delay_seconds == 3.0
    assert outcomes[2].delay_seconds == 0.0
    # The observer's label and the flush's status of the same outcome.
    assert [o.decision.value for o in outcomes] == ["failed", "failed", "dead"]
    assert {o.status for o in outcomes} == {"failed"}
    assert all(o.attempted and o.error == "boom" for o in outcomes)


def test_a_permanent_failure_is_dead_at_once_and_parked_only_where_configured() -> None:
    block = make_registry(outbox={"max_retries": 5}).get(OUTBOX_BOX).config
    park = make_registry(outbox={"max_retries": 5, "poisoned_head": "park"}).get(OUTBOX_BOX).config
    loose = make_registry(outbox={"strict_order": False, "poisoned_head": "park"}).get(OUTBOX_BOX)
    blocked = failed(block, 0, "bad", permanent=True)
    parked = failed(park, 0, "bad", permanent=True)
    assert (blocked.decision, blocked.errors_count, blocked.item_status()) == (
        Decision.DEAD,
        1,
        ItemStatus.FAILED,
    )
    assert (parked.decision, parked.item_status()) == (Decision.DEAD, ItemStatus.PARKED)
    # Parking moves a strict box's head aside; a box without strict order never parks.
    assert failed(loose.config, 0, "bad", permanent=True).item_status() is ItemStatus.FAILED


def test_outcomes_that_are_not_attempts_leave_the_item_pending() -> None:
    for outcome, label in [
        (DEFERRED, "deferred"),
        (unavailable("broker down"), "unavailable"),
        (pending("box paused"), "deferred"),
    ]:
        assert (outcome.decision.value, outcome.status, outcome.attempted) == (
            label,
            "pending",
            False,
        )
    assert (DELIVERED.status, DELIVERED.error, DELIVERED.attempted) == ("delivered", None, False)
    gone = discarded("superseded")
    assert (gone.status, gone.decision.value, gone.error) == (
        "discarded",
        "discarded",
        "superseded",
    )


def test_a_flush_reads_the_same_outcome_back_from_a_row() -> None:
    assert from_row(int(ItemStatus.PENDING), 0, None) is None  # nothing happened yet
    retried = from_row(int(ItemStatus.PENDING), 2, "boom")
    assert retried is not None
    assert (retried.status, retried.error) == ("pending", "boom")
    for status, expected in [
        (ItemStatus.DELIVERED, "delivered"),
        (ItemStatus.FAILED, "failed"),
        (ItemStatus.PARKED, "failed"),
        (ItemStatus.DISCARDED, "discarded"),
    ]:
        outcome = from_row(int(status), 1, "e")
        assert outcome is not None
        assert (outcome.status, outcome.error, outcome.errors_count) == (expected, "e", 1)
