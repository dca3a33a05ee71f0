"""The one outcome of an item's attempt, decided once and read by everyone after it.

Delivery decides what became of each item; recording (store/record.py), the observer's
metrics and the synchronous flush (sharding/flush.py) all read that same `Outcome`, so the
decision is made in one place and named in one vocabulary:

* ``DELIVERED``: sent (outbox) or handled (inbox);
* ``RETRY``: a failed attempt; the item stays pending and goes again `delay_seconds` after
  the record (its attempt count is `errors_count`);
* ``DEAD``: failed for good (retries used up, or a permanent failure); `parked` when a strict
  box with ``poisoned_head: park`` moves it aside instead of holding its key;
* ``DISCARDED``: never sent: superseded (latest_available) or coalesced; `error` says why;
* ``UNAVAILABLE``: the transport was unavailable: not an attempt, the item stays as it was;
* ``DEFERRED``: not attempted in this batch (behind its key's undelivered item, or its
  batch transaction failed as a whole): stays as it was.

A decision's value is the label the observer reports; `status` is the flush's coarser view
(delivered, failed, discarded, pending). The outcomes without data (delivered, deferred,
unavailable) are shared constants: the hot path allocates nothing per delivered item.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from outbox_engine.relay.retry import decide
from outbox_engine.store.status import ItemStatus

if TYPE_CHECKING:
    from outbox_engine.config.boxes import BoxConfig


class Decision(enum.Enum):
    DELIVERED = "delivered"
    RETRY = "failed"
    DEAD = "dead"
    DISCARDED = "discarded"
    UNAVAILABLE = "unavailable"
    DEFERRED = "deferred"


# The flush's view of a decision: did the item get where it goes, for good or not yet.
_FLUSH_STATUS = {
    Decision.DELIVERED: "delivered",
    Decision.RETRY: "failed",
    Decision.DEAD: "failed",
    Decision.DISCARDED: "discarded",
    Decision.UNAVAILABLE: "pending",
    Decision.DEFERRED: "pending",
}
# What a flush that waited for the bucket's owner reads back from a row's status.
_STATUS_DECISION = {
    int(ItemStatus.DELIVERED): Decision.DELIVERED,
    int(ItemStatus.FAILED): Decision.DEAD,
    int(ItemStatus.PARKED): Decision.DEAD,
    int(ItemStatus.DISCARDED): Decision.DISCARDED,
}


@dataclass(frozen=True, slots=True)
class Outcome:
    decision: Decision
    error: str | None = None
    errors_count: int = 0  # after this attempt (RETRY, DEAD)
    delay_seconds: float = 0.0  # RETRY: the next attempt this long after the record
    parked: bool = False  # DEAD in a strict box with poisoned_head: park

    @property
    def status(self) -> str:
        """delivered | failed | discarded | pending (the flush's vocabulary)."""
        return _FLUSH_STATUS[self.decision]

    @property
    def attempted(self) -> bool:
        """A failed attempt that recording counts (RETRY or DEAD)."""
        return self.decision is Decision.RETRY or self.decision is Decision.DEAD

    def item_status(self) -> ItemStatus:
        """The status a failed attempt leaves its item in."""
        if self.decision is Decision.RETRY:
            return ItemStatus.PENDING
        return ItemStatus.PARKED if self.parked else ItemStatus.FAILED


DELIVERED = Outcome(Decision.DELIVERED)
DEFERRED = Outcome(Decision.DEFERRED)


def failed(config: BoxConfig, errors_before: int, error: str, *, permanent: bool) -> Outcome:
    """A failed attempt of an item that had `errors_before` failures: retry or dead."""
    decision = decide(config, errors_before, permanent)
    if not decision.give_up:
        return Outcome(Decision.RETRY, error, decision.errors_count, decision.delay_seconds)
    park = config.strict_order and config.poisoned_head == "park"
    return Outcome(Decision.DEAD, error, decision.errors_count, parked=park)


def unavailable(error: str) -> Outcome:
    return Outcome(Decision.UNAVAILABLE, error)


def discarded(reason: str) -> Outcome:
    return Outcome(Decision.DISCARDED, reason)


def pending(why: str | None) -> Outcome:
    """Not delivered yet, left to the worker (the flush's answer): `why` says why."""
    return Outcome(Decision.DEFERRED, why)


def from_row(status: int, errors_count: int, error: str | None) -> Outcome | None:
    """The outcome a row shows once its owner worked on it; None while nothing happened."""
    decision = _STATUS_DECISION.get(status)
    if decision is not None:
        return Outcome(decision, error, errors_count)
    if errors_count:
        return pending(error)  # an attempt failed; the owner tries again
    return None
