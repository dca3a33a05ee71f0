"""What a transport is: a class whose call receives an item and its payload.

A transport reports success by returning True (or None) and failure by returning False or
raising. Two exceptions carry meaning for the engine:

* `TransportUnavailable`: the destination is down (broker outage, connection refused). The
  item stays pending as it was, no retry is consumed, and the worker backs off the box.
* `PermanentFailure`: retrying cannot help (e.g. the message is too large). The item is
  marked failed at once.

A `PipelinedTransport` can accept the next item of the same key before the previous one is
confirmed, because its destination keeps the order in which items were handed to it (an
idempotent Kafka producer does). The engine hands items of one key to it in id order and
waits for the confirmations together, which is what makes a Kafka relay fast.

An `EventHandler[Model]` is an inbox handler that receives its payload parsed into a pydantic
model; a payload that does not validate is a `PermanentFailure` naming the field.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, get_args, get_origin
from uuid import UUID

from pydantic import BaseModel

from outbox_engine.contracts.events import InvalidEvent, decode_event

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from outbox_engine.transports.resources import Resources


class TransportUnavailable(Exception):
    """The destination cannot be reached now; retry later without counting an attempt."""


class PermanentFailure(Exception):
    """Retrying cannot help; fail the item now."""


@dataclass(slots=True, eq=False)
class ItemRecord:
    """An item as the worker sees it (a row snapshot, not an ORM object). Read-only by
    contract: the engine builds thousands per second, and a frozen dataclass costs five
    times as much to build, so it is not enforced. Compared and hashed by identity."""

    id: int
    uuid: UUID
    box: str
    event_name: str
    event_key: str
    bucket: int
    headers: dict[str, Any]
    errors_count: int
    created_at: datetime
    source_topic: str | None = None
    source_partition: int | None = None
    source_offset: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def correlation_id(self) -> str:
        return str(self.headers.get("correlation-id", self.uuid))

    @property
    def hop(self) -> int:
        try:
            return int(self.headers.get("hop", 0))
        except (TypeError, ValueError):
            return 0


class BaseTransport(abc.ABC):  # noqa: B024 - setup/close are optional hooks, not abstract
    """What every transport shares. Subclasses take their configured `args` as keyword
    arguments in `__init__`."""

    async def setup(self, resources: Resources) -> None:  # noqa: B027
        """Called once before the first item, with the shared resources (producer, ...)."""

    async def close(self) -> None:  # noqa: B027
        """Called once at shutdown."""


class Transport(BaseTransport):
    """An outbox transport: deliver the item somewhere outside this service."""

    @abc.abstractmethod
    async def __call__(self, item: ItemRecord, payload: bytes) -> bool | None:
        """Deliver one item; True/None is success, False or an exception is failure."""


class PipelinedTransport(Transport):
    """A transport whose destination preserves hand-over order (see module docstring)."""

    # True when the destination also fails in order: once an item of a key could not be
    # delivered, no later item of that key handed over in the same call is. Then a strict box
    # may hand it a whole batch at once; otherwise a strict box hands items over one at a
    # time per key, each after the previous one's outcome. The relay checks it after every
    # batch and logs an error (and counts `outbox.order.gaps`) where it did not hold.
    fails_in_order: ClassVar[bool] = False

    @abc.abstractmethod
    def enqueue(self, item: ItemRecord, payload: bytes) -> Awaitable[bool | None]:
        """Hand the item over synchronously and return an awaitable of its outcome."""

    def enqueue_many(
        self, items: Sequence[tuple[ItemRecord, bytes]]
    ) -> Awaitable[Sequence[BaseException | bool | None]]:
        """Hand several items over in this order; one awaitable of their outcomes, in the
        same order: True/None (delivered), False or an exception (failed).

        The relay calls this with a whole batch. The default calls `enqueue` per item;
        override it when the destination can take a batch more cheaply (the Kafka
        transport does: one future for the batch instead of one per message)."""
        handed: list[Awaitable[bool | None]] = []
        for item, payload in items:
            try:
                handed.append(self.enqueue(item, payload))
            except Exception as exc:
                handed.append(_raise(exc))
        return asyncio.gather(*handed, return_exceptions=True)

    async def __call__(self, item: ItemRecord, payload: bytes) -> bool | None:
        return await self.enqueue(item, payload)


async def _raise(exc: BaseException) -> bool | None:
    raise exc


class InboxHandler(BaseTransport):
    """An inbox transport: apply a received message to this service's own state.

    `handle` runs inside the transaction that marks the item delivered, on `session`: its
    writes and the status change commit together or not at all. Outbox items created on
    that session continue the message's chain (correlation id, causation id, hop + 1).
    """

    @abc.abstractmethod
    async def handle(self, item: ItemRecord, payload: bytes, session: AsyncSession) -> bool | None:
        """Apply the message; True/None is success, False or an exception rolls back."""


E = TypeVar("E", bound=BaseModel)


class EventHandler(InboxHandler, Generic[E]):
    """An inbox handler of one event, typed: declare the model as the type argument (or set
    `model`) and implement `handle_event`, which gets the parsed instance::

        class PaymentReceivedHandler(EventHandler[PaymentReceived]):
            async def handle_event(self, item, event: PaymentReceived, session) -> None: ...

    A payload the model refuses fails the item at once (`PermanentFailure`), with a reason
    that names the fields and rules, never the values. Bind the handler to its event in
    `config/boxes.yaml` (`event_name:`); the registry checks that the box declares the same
    model for it."""

    model: ClassVar[type[BaseModel]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "model" in cls.__dict__:
            return
        for base in getattr(cls, "__orig_bases__", ()):
            if get_origin(base) is EventHandler:
                (argument,) = get_args(base)
                if isinstance(argument, type) and issubclass(argument, BaseModel):
                    cls.model = argument
                    return

    def parse(self, item: ItemRecord, payload: bytes) -> E:
        """The payload as the model; `PermanentFailure` naming the fields when it does not
        validate."""
        try:
            event: E = decode_event(self.model, item.event_name, payload)
        except InvalidEvent as exc:
            raise PermanentFailure(str(exc)) from None
        return event

    async def handle(self, item: ItemRecord, payload: bytes, session: AsyncSession) -> bool | None:
        return await self.handle_event(item, self.parse(item, payload), session)

    @abc.abstractmethod
    async def handle_event(self, item: ItemRecord, event: E, session: AsyncSession) -> bool | None:
        """Apply the event; as `InboxHandler.handle`: True/None success, False or raise fails."""
