"""Observation hooks: what the engine reports about its work.

The engine calls an `Observer` at each step (create, claim, process, publish, receive);
the base class does nothing, so the engine carries no telemetry dependency. The service's
telemetry module (when generated) supplies an implementation with OpenTelemetry spans and
metrics.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from outbox_engine.config.registry import Box
    from outbox_engine.transports.base import ItemRecord


class ProcessScope:
    """One item's processing. `headers` carry its trace context to what it sends; entering
    the scope makes it current (for inbox handlers, so their outbox items nest under it)."""

    headers: Mapping[str, str] = {}

    def __enter__(self) -> ProcessScope:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def end(self, error: BaseException | None = None) -> None:
        """The item's attempt is over."""


class PublishSpan:
    """One message handed to a broker; `end` is called with its delivery outcome."""

    def headers(self) -> dict[str, str]:
        """Trace context to send with the message."""
        return {}

    def end(self, error: BaseException | None = None) -> None:
        """The delivery report arrived (or failed)."""


class Observer:
    """No-op hooks; override what you measure."""

    def observes(self, hook: str) -> bool:
        """Whether this observer's class overrides `hook` (a method name). The base one
        does nothing, so the relay skips what only feeds it: a call and a list entry per
        item of every batch, on its hottest path, when telemetry is off."""
        return getattr(type(self), hook) is not getattr(Observer, hook)

    def created(self, box: Box, event_names: list[str]) -> None:
        """Items were created (not yet committed)."""

    def claimed(self, box: Box, count: int) -> None:
        """A batch was claimed."""

    def processing(self, box: Box, item: ItemRecord) -> ProcessScope:
        """Starts when an item's delivery or handling starts."""
        return _NO_SCOPE

    def outcomes(self, box: Box, results: Sequence[tuple[ItemRecord, str]], seconds: float) -> None:
        """A batch's attempts ended, each delivered, failed, dead, discarded, unavailable or
        deferred; the batch took `seconds` from claim to recorded outcome."""

    def fenced(self, box: Box, count: int) -> None:
        """Outcomes dropped because their items changed state since this worker claimed them
        (another worker took over the bucket): not applied, only counted."""

    def order_gap(self, box: Box, item: ItemRecord) -> None:
        """In a strict box, `item` was delivered although an earlier item of its key failed
        in the same batch (a transport that did not fail in order)."""

    def publishing(self, item: ItemRecord, destination: str) -> PublishSpan:
        return NO_SPAN

    def continuing(self, headers: Mapping[str, Any]) -> contextlib.AbstractContextManager[None]:
        """Runs what is inside in the trace context that `headers` (an item's) carry, so that
        an instrumented client a transport calls (an HTTP client span) joins the item's
        trace instead of starting one."""
        return contextlib.nullcontext()

    def received(
        self, box: Box, topic: str, partition: int, offset: int, headers: Mapping[str, str]
    ) -> dict[str, str]:
        """A message was read into an inbox; returns headers to store with it."""
        return {}

    def stored(self, box: Box, received: int, stored: int) -> None:
        """A consumed batch was stored (stored <= received: duplicates are dropped)."""

    def consumer_lag(self, box: Box, topic: str, partition: int, lag: int) -> None:
        """Messages behind the end of a partition."""

    def depth(self, box: Box, pending: int, oldest_age_seconds: float, deepest_bucket: int) -> None:
        """The box's backlog, sampled periodically by the worker."""

    def slot_lag(self, slot: str, lag_bytes: int | None) -> None:
        """WAL the Debezium relay's replication slot holds back (bytes between the server's
        position and what Debezium confirmed), sampled by the worker when a box is relayed
        by Debezium; None when the slot does not exist."""


NO_SPAN = PublishSpan()  # what the base Observer returns: nothing to end
_NO_SCOPE = ProcessScope()
