"""Pipelined delivery (relay/strategies/pipelined.py): each transport gets its items of the
batch in one call, in id order, and each item's outcome joins what every transport of its
event reported. Transports looked up per event name once per batch: these cases mix events
with different transports, one transport shared by two events, and a transport that raises
while handed the batch."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import Awaitable, Sequence
from datetime import UTC, datetime

import pytest

from outbox_engine.config.registry import BoundTransport, Box
from outbox_engine.middleware import Middlewares
from outbox_engine.observability.observer import Observer
from outbox_engine.relay.batch import Slot
from outbox_engine.relay.outcomes import Decision
from outbox_engine.relay.strategies.base import DeliveryContext
from outbox_engine.relay.strategies.pipelined import deliver_pipelined
from outbox_engine.transports.base import ItemRecord, PipelinedTransport

from ..support import OUTBOX_BOX, make_registry


class Recording(PipelinedTransport):
    """Records each call's item ids; fails the ids in `refuse` (False) and `broken` (raises)."""

    def __init__(self, refuse: Sequence[int] = (), broken: Sequence[int] = ()) -> None:
        self.calls: list[list[int]] = []
        self.refuse, self.broken = set(refuse), set(broken)

    def enqueue(self, item: ItemRecord, payload: bytes) -> Awaitable[bool | None]:
        raise AssertionError("the pipelined path hands the batch over with enqueue_many")

    def enqueue_many(
        self, items: Sequence[tuple[ItemRecord, bytes]]
    ) -> Awaitable[Sequence[BaseException | bool | None]]:
        ids = [item.id for item, _ in items]
        self.calls.append(ids)
        return self._outcomes(ids)

    async def _outcomes(self, ids: list[int]) -> list[BaseException | bool | None]:
        return [
            RuntimeError(f"broken {n}") if n in self.broken else n not in self.refuse for n in ids
        ]


class Unready(PipelinedTransport):
    """Raises while being handed the batch (a producer not started, say)."""

    def __init__(self) -> None:
        self.calls = 0

    def enqueue(self, item: ItemRecord, payload: bytes) -> Awaitable[bool | None]:
        raise AssertionError("not used")

    def enqueue_many(
        self, items: Sequence[tuple[ItemRecord, bytes]]
    ) -> Awaitable[Sequence[BaseException | bool | None]]:
        self.calls += 1
        raise ConnectionError("not ready")


def _box(bindings: list[tuple[str, PipelinedTransport]]) -> Box:
    box = make_registry().get(OUTBOX_BOX)
    return dataclasses.replace(
        box, transports=[BoundTransport(name, t) for name, t in bindings], _matching={}
    )


def _slots(events: str) -> list[Slot]:
    now = datetime.now(UTC)
    return [
        Slot(ItemRecord(n, uuid.uuid4(), OUTBOX_BOX, name, f"k{n}", 0, {}, 0, now), b"x")
        for n, name in enumerate(events, start=1)
    ]


def _deliver(box: Box, slots: list[Slot]) -> None:
    asyncio.run(deliver_pipelined(DeliveryContext(box, Middlewares(), Observer()), slots))


def test_each_transport_gets_its_events_items_in_one_call_in_id_order() -> None:
    first, shared = Recording(), Recording(refuse=[5], broken=[4])
    box = _box([("a", first), ("a", shared), ("b", shared)])
    slots = _slots("ababab")
    _deliver(box, slots)
    assert first.calls == [[1, 3, 5]]
    assert shared.calls == [[1, 2, 3, 4, 5, 6]]
    decisions = [slot.outcome.decision for slot in slots]
    assert decisions == [Decision.DELIVERED] * 3 + [Decision.RETRY] * 2 + [Decision.DELIVERED]
    assert (slots[3].outcome.error or "").startswith("RuntimeError: broken 4")
    assert slots[4].outcome.error == "TransportFailed: transport returned False"


def test_an_item_fails_when_one_of_its_events_transports_fails() -> None:
    fine, failing = Recording(), Recording(refuse=[2])
    box = _box([("a", fine), ("a", failing), ("b", fine)])
    slots = _slots("aab")
    _deliver(box, slots)
    assert fine.calls == [[1, 2, 3]]
    assert failing.calls == [[1, 2]]
    assert [slot.outcome.decision for slot in slots] == [
        Decision.DELIVERED,
        Decision.RETRY,
        Decision.DELIVERED,
    ]


def test_a_transport_that_raises_when_handed_the_batch_fails_only_its_items() -> None:
    fine, unready = Recording(), Unready()
    box = _box([("a", fine), ("b", unready)])
    slots = _slots("abba")
    _deliver(box, slots)
    assert fine.calls == [[1, 4]]
    assert unready.calls == 1
    assert [slot.outcome.decision for slot in slots] == [
        Decision.DELIVERED,
        Decision.RETRY,
        Decision.RETRY,
        Decision.DELIVERED,
    ]
    assert slots[1].outcome.error == slots[2].outcome.error == "ConnectionError: not ready"


class Pending(PipelinedTransport):
    """Hands back a future that it never completes, or completes as `end` says: cancelled,
    or with an exception (a producer closed under the batch, say)."""

    def __init__(self, end: str = "never") -> None:
        self.end = end

    def enqueue(self, item: ItemRecord, payload: bytes) -> Awaitable[bool | None]:
        raise AssertionError("not used")

    def enqueue_many(
        self, items: Sequence[tuple[ItemRecord, bytes]]
    ) -> Awaitable[Sequence[BaseException | bool | None]]:
        future: asyncio.Future[Sequence[BaseException | bool | None]]
        future = asyncio.get_running_loop().create_future()
        if self.end == "cancelled":
            future.cancel()
        elif self.end == "raises":
            future.set_exception(ConnectionResetError("producer closed"))
        elif self.end == "times out":
            future.set_exception(TimeoutError("the destination's own timeout"))
        return future


def _with_timeout(box: Box, seconds: float) -> Box:
    config = box.config.model_copy(update={"transport_timeout_seconds": seconds})
    return dataclasses.replace(box, config=config)


def test_one_transport_is_awaited_alone_with_every_outcome_of_its_call() -> None:
    """The usual batch (one Kafka transport) takes the path without `gather`: the same
    outcomes, in the same positions."""
    only = Recording(refuse=[2], broken=[3])
    slots = _slots("aaaa")
    _deliver(_box([("a", only)]), slots)
    assert only.calls == [[1, 2, 3, 4]]
    assert [slot.outcome.decision for slot in slots] == [
        Decision.DELIVERED,
        Decision.RETRY,
        Decision.RETRY,
        Decision.DELIVERED,
    ]
    assert slots[1].outcome.error == "TransportFailed: transport returned False"
    assert (slots[2].outcome.error or "").startswith("RuntimeError: broken 3")


@pytest.mark.parametrize("transports", [1, 2])
def test_no_report_within_the_transport_timeout_fails_every_item(transports: int) -> None:
    bindings: list[tuple[str, PipelinedTransport]] = [("a", Pending())]
    if transports == 2:
        bindings.append(("a", Recording()))
    slots = _slots("aa")
    started = time.monotonic()
    _deliver(_with_timeout(_box(bindings), 0.2), slots)
    assert 0.19 <= time.monotonic() - started < 2.0
    assert [slot.outcome.decision for slot in slots] == [Decision.RETRY, Decision.RETRY]
    assert {slot.outcome.error for slot in slots} == {
        "TimeoutError: no delivery report within 0.2s"
    }


@pytest.mark.parametrize(
    ("end", "error"),
    [
        ("cancelled", "CancelledError"),
        ("raises", "ConnectionResetError: producer closed"),
        ("times out", "TimeoutError: the destination's own timeout"),
    ],
)
def test_a_call_that_ends_cancelled_or_raising_fails_its_items_only(end: str, error: str) -> None:
    """As `gather(return_exceptions=True)` reported it: the batch goes on, the items of that
    call are failed attempts (a cancelled report does not cancel the relay's lane), and a
    TimeoutError of the call's own is its error, not the relay's "no delivery report"."""
    slots = _slots("aa")
    _deliver(_box([("a", Pending(end))]), slots)
    assert [slot.outcome.decision for slot in slots] == [Decision.RETRY, Decision.RETRY]
    assert all((slot.outcome.error or "").startswith(error) for slot in slots), slots
