"""What every delivery strategy shares: its context and how a failure becomes an outcome.

A strategy gets the box, the middlewares and the observer once (`DeliveryContext`) and
implements `deliver(slots)`, which sets each slot's outcome. `fail` is the one place an
exception becomes an outcome: an unavailable destination is not an attempt; a permanent
failure (the transport's `PermanentFailure`, or the database refusing the data itself) ends
the item; anything else is a failed attempt that retries with backoff.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from outbox_engine.config.registry import Box
from outbox_engine.middleware import Middlewares
from outbox_engine.observability.observer import Observer
from outbox_engine.relay.batch import Slot, error_text
from outbox_engine.relay.outcomes import failed, unavailable
from outbox_engine.transports.base import PermanentFailure, TransportUnavailable


@dataclass(frozen=True)
class DeliveryContext:
    box: Box
    middlewares: Middlewares
    observer: Observer


class Strategy(Protocol):
    # The header that marks an item its consumer could not take (refused before delivery).
    rejected_header: str | None

    async def deliver(self, slots: list[Slot]) -> None:
        """Deliver the live slots of a batch (at least one), setting each one's outcome."""


def fail(ctx: DeliveryContext, slot: Slot, exc: BaseException) -> None:
    """Set `slot`'s outcome for a delivery that raised `exc`."""
    from outbox_engine.relay.failures import is_permanent

    config = ctx.box.config
    if isinstance(exc, TimeoutError) and not str(exc):
        text = error_text(TimeoutError(f"timed out after {config.transport_timeout_seconds:g}s"))
    else:
        text = error_text(exc)
    if isinstance(exc, TransportUnavailable):
        slot.outcome = unavailable(text)
        return
    # is_permanent: also the database refusing the data itself (overflow, a check).
    permanent = isinstance(exc, PermanentFailure) or is_permanent(exc)
    slot.outcome = failed(config, slot.item.errors_count, text, permanent=permanent)
