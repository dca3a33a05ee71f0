"""The state of a claimed batch while it is relayed: one `Slot` per item, a `BatchReport`.

A slot carries its item, its payload and the item's `Outcome` (relay/outcomes.py), which
starts as DEFERRED (not attempted) and is set once by a filter or a delivery strategy.
The report counts what the batch did, for the worker's loop (an unavailable destination
backs the lane off) and for tests.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass

from outbox_engine.config.registry import Box
from outbox_engine.observability.observer import Observer, ProcessScope
from outbox_engine.relay.outcomes import DEFERRED, Outcome
from outbox_engine.transports.base import ItemRecord

MAX_ERROR_LENGTH = 2000


@dataclass(slots=True)
class Slot:
    """The state of one item during delivery."""

    item: ItemRecord
    payload: bytes
    outcome: Outcome = DEFERRED
    # Only the per-item path (ordered hand-over between items of a key) needs an event;
    # the pipelined path never creates one.
    _released: asyncio.Event | None = None
    released_ok: bool = False
    # The item's state change is already written (an inbox item, in its handler's
    # transaction): recording leaves it alone.
    recorded: bool = False
    scope: ProcessScope | None = None

    @property
    def released(self) -> asyncio.Event:
        if self._released is None:
            self._released = asyncio.Event()
        return self._released

    def start(self, observer: Observer, box: Box) -> None:
        """Open the item's processing scope; what it sends carries the scope's context."""
        self.scope = observer.processing(box, self.item)
        if self.scope.headers:
            self.item = dataclasses.replace(
                self.item, headers={**self.item.headers, **self.scope.headers}
            )

    def finish(self, error: BaseException | None = None) -> None:
        if self.scope is not None:
            self.scope.end(error)
            self.scope = None

    def release(self) -> None:
        self.released_ok = True
        self.released.set()


@dataclass
class BatchReport:
    claimed: int = 0
    delivered: int = 0
    failed_attempts: int = 0
    dead: int = 0
    discarded: int = 0
    deferred: int = 0
    unavailable: int = 0
    # What the first unavailable item was told (say, `kafka: _MSG_TIMED_OUT: ...`), for the
    # worker's back-off line: an outage that outlasts its cause needs its reason in the log.
    unavailable_error: str | None = None
    # The lane claims again at once only when this is set: the claim stopped at a limit
    # (relay/claim.py `left_more`) or items were deferred (they are claimable again now).
    # Otherwise everything claimable was taken, and what commits later wakes the lane.
    more: bool = False


class TransportFailed(Exception):
    """A transport returned False."""


def check(result: object) -> None:
    """A transport's or handler's False is a failed attempt."""
    if result is False:
        raise TransportFailed("transport returned False")


def error_text(exc: BaseException) -> str:
    """What an item records of a failure: never the statement, its parameters or payload
    values (see failures.py), at most MAX_ERROR_LENGTH characters."""
    from outbox_engine.relay.failures import failure_text

    return failure_text(exc)[:MAX_ERROR_LENGTH]
