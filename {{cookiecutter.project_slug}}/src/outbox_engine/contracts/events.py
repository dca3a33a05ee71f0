"""Typed events: a pydantic model per event name of a box, and how payloads cross the wire.

An item class declares the models of its events next to its table::

    class OrderCreated(Event):
        event_name: ClassVar[str] = "order_created"
        schema_version: ClassVar[int] = 1
        id: int
        amount: float

    class OrderOutboxItem(OutboxItemMixin, Base):
        __tablename__ = "order_outbox_items"
        event_types = EventTypes(OrderCreated, OrderUpdated)

`Outbox.create` then takes an `OrderCreated(...)` (or still a dict, or bytes) for
`order_created`: a payload of a declared event is validated against its model when it is
created, never again by the relay. It is sent as compact JSON, the same bytes as a dict of the
same data gave before (`json.dumps` with the engine's separators), with the headers
`content-type: application/json` and `schema-version: <n>`. An inbox `EventHandler` declares
its model and gets a parsed instance; a payload that does not validate fails for good with a
reason that names the field and never repeats the payload's values (it is stored as
`last_error` and logged).

The contract these models make is published as an AsyncAPI document (asyncapi.py) and checked
for breaking changes (check.py): bump `schema_version` with any change you make,
and keep changes compatible (add optional fields; never remove, retype or newly require one).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

JSON_CONTENT_TYPE = "application/json"
CONTENT_TYPE_HEADER = "content-type"
SCHEMA_VERSION_HEADER = "schema-version"
# How many validation errors a failure reason lists (the rest are counted).
MAX_REASONS = 5
MAX_REASON_LENGTH = 500


class Event(BaseModel):
    """Base of an event model: names its event and the version of its schema.

    Frozen (an event is a fact); unknown fields are ignored when parsing, so a consumer keeps
    working when the producer adds an optional field."""

    model_config = ConfigDict(frozen=True)

    event_name: ClassVar[str] = ""
    schema_version: ClassVar[int] = 1


class InvalidEvent(ValueError):
    """A payload does not match its event's model; the message names the fields."""


class EventTypes:
    """The event models of one box: `EventTypes(OrderCreated, ...)` takes `Event` subclasses
    by their `event_name`; `EventTypes(legacy_event=SomeModel)` names any pydantic model."""

    def __init__(self, *events: type[Event], **named: type[BaseModel]) -> None:
        self._models: dict[str, type[BaseModel]] = {}
        pairs: list[tuple[str, Any]] = [(getattr(e, "event_name", ""), e) for e in events]
        for model in events:
            if not (isinstance(model, type) and issubclass(model, Event)) or not model.event_name:
                raise TypeError(
                    f"EventTypes: {model!r} is not an Event subclass with an event_name; "
                    "pass other models by name: EventTypes(my_event=MyModel)"
                )
        pairs += list(named.items())
        for name, model in pairs:
            if not (isinstance(model, type) and issubclass(model, BaseModel)):
                raise TypeError(f"EventTypes: {name}: {model!r} is not a pydantic model")
            if not name or len(name) > 255:
                raise TypeError(f"EventTypes: event name {name!r} must be 1-255 characters")
            if name in self._models:
                raise TypeError(f"EventTypes: event {name!r} is declared twice")
            self._models[name] = model
        self._names = {model: name for name, model in self._models.items()}

    def model_for(self, event_name: str) -> type[BaseModel] | None:
        return self._models.get(event_name)

    def name_of(self, model: type[BaseModel]) -> str | None:
        return self._names.get(model)

    def items(self) -> list[tuple[str, type[BaseModel]]]:
        return list(self._models.items())

    def __iter__(self) -> Iterator[str]:
        return iter(self._models)

    def __len__(self) -> int:
        return len(self._models)

    def __repr__(self) -> str:
        return f"EventTypes({', '.join(f'{n}={m.__name__}' for n, m in self._models.items())})"


NO_EVENTS = EventTypes()


def schema_version(model: type[BaseModel]) -> int:
    version = getattr(model, "schema_version", 1)
    return version if isinstance(version, int) and not isinstance(version, bool) else 1


def describe(error: ValidationError, event_name: str) -> str:
    """`malformed <event> payload: <field>: <why>; ...`: the fields and rules, never the
    input values (pydantic's messages state the rule; the input is left out)."""
    errors = error.errors(include_url=False, include_input=False, include_context=False)
    parts = []
    for entry in errors[:MAX_REASONS]:
        where = ".".join(str(part) for part in entry["loc"])
        parts.append(f"{where}: {entry['msg']}" if where else entry["msg"])
    if len(errors) > MAX_REASONS:
        parts.append(f"and {len(errors) - MAX_REASONS} more")
    text = f"malformed {event_name} payload: {'; '.join(parts)}"
    return text if len(text) <= MAX_REASON_LENGTH else text[: MAX_REASON_LENGTH - 1] + "…"


def decode_event(model: type[BaseModel], event_name: str, payload: bytes | str) -> Any:
    """Parse a JSON payload into `model`; raises `InvalidEvent` naming the fields."""
    try:
        return model.model_validate_json(payload)
    except ValidationError as exc:
        raise InvalidEvent(describe(exc, event_name)) from None


def to_json(data: Any) -> bytes:
    """The engine's JSON: compact, ASCII (what `create` has always written for a dict)."""
    return json.dumps(data, separators=(",", ":")).encode("utf-8")


def encode_event(
    event_name: str, model: type[BaseModel] | None, payload: Any
) -> tuple[bytes | None, dict[str, str]]:
    """The bytes and headers of a payload created for an event, whose box declares `model`
    for it (or nothing). Bytes None: encode the payload as `create` always has (a dict of an
    event without a model, bytes, text).

    A model instance must be of the declared model; a mapping, list, str or bytes of a
    declared event is validated against it. Raises `InvalidEvent` or `TypeError`."""
    if isinstance(payload, BaseModel):
        if model is not None and not isinstance(payload, model):
            raise TypeError(
                f"event {event_name} takes {model.__name__}, not {type(payload).__name__}"
            )
        headers = {CONTENT_TYPE_HEADER: JSON_CONTENT_TYPE}
        if model is not None or isinstance(payload, Event):
            headers[SCHEMA_VERSION_HEADER] = str(schema_version(model or type(payload)))
        return to_json(payload.model_dump(mode="json")), headers
    if model is None:
        if isinstance(payload, bytes | str):
            return None, {}
        return None, {CONTENT_TYPE_HEADER: JSON_CONTENT_TYPE}
    try:
        if isinstance(payload, bytes | str):
            model.model_validate_json(payload)
        else:
            model.model_validate(payload)
    except ValidationError as exc:
        raise InvalidEvent(describe(exc, event_name)) from None
    return None, {
        CONTENT_TYPE_HEADER: JSON_CONTENT_TYPE,
        SCHEMA_VERSION_HEADER: str(schema_version(model)),
    }
