"""Typed events without services: declaring models, encoding what `create` writes, parsing
what a handler gets, and the reasons a refused payload leaves."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, Field

from outbox_engine.config.boxes import ConfigError
from outbox_engine.contracts.events import (
    Event,
    EventTypes,
    InvalidEvent,
    decode_event,
    encode_event,
)
from outbox_engine.creation.items import encode_payload
from outbox_engine.transports.base import (
    EventHandler,
    ItemRecord,
    PermanentFailure,
)

from ..support import INBOX_BOX, InboxItem, make_registry


class Shipped(Event):
    event_name: ClassVar[str] = "shipped"
    schema_version: ClassVar[int] = 3

    order_id: int = Field(ge=1)
    carrier: str
    weight: Decimal
    note: str | None = None


class Plain(BaseModel):
    value: int


def test_event_types_map_names_and_models_both_ways() -> None:
    types = EventTypes(Shipped, legacy=Plain)
    assert list(types) == ["shipped", "legacy"]
    assert len(types) == 2
    assert types.model_for("shipped") is Shipped
    assert types.model_for("legacy") is Plain
    assert types.model_for("other") is None
    assert types.name_of(Plain) == "legacy"
    assert types.name_of(Shipped) == "shipped"


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: EventTypes(Plain), "not an Event subclass with an event_name"),  # type: ignore[arg-type]
        (lambda: EventTypes(Event), "not an Event subclass with an event_name"),
        (lambda: EventTypes(Shipped, shipped=Plain), "event 'shipped' is declared twice"),
        (lambda: EventTypes(x=dict), "is not a pydantic model"),  # type: ignore[arg-type]
    ],
)
def test_bad_declarations_are_refused_with_the_reason(build: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        build()


def test_a_model_is_written_as_the_same_bytes_as_its_dict_with_headers() -> None:
    event = Shipped(order_id=7, carrier="Posté", weight=Decimal("1.50"))
    data = {"order_id": 7, "carrier": "Posté", "weight": "1.50", "note": None}
    encoded, headers = encode_event("shipped", Shipped, event)
    assert encoded == encode_payload(data)
    assert encoded == b'{"order_id":7,"carrier":"Post\\u00e9","weight":"1.50","note":null}'
    assert headers == {"content-type": "application/json", "schema-version": "3"}


def test_a_dict_of_a_declared_event_is_validated_and_kept_as_written() -> None:
    data = {"order_id": 7, "carrier": "x", "weight": 2}
    encoded, headers = encode_event("shipped", Shipped, data)
    assert encoded is None  # create writes the dict itself: same bytes as before
    assert headers["schema-version"] == "3"
    with pytest.raises(InvalidEvent) as refused:
        encode_event("shipped", Shipped, {"order_id": 0, "weight": "heavy"})
    assert str(refused.value) == (
        "malformed shipped payload: order_id: Input should be greater than or equal to 1; "
        "carrier: Field required; weight: Input should be a valid decimal"
    )
    # bytes and text of a declared event are JSON that must validate too
    assert encode_event("shipped", Shipped, b'{"order_id":1,"carrier":"c","weight":1}')[0] is None
    with pytest.raises(InvalidEvent, match="malformed shipped payload: Invalid JSON"):
        encode_event("shipped", Shipped, "not json")


def test_the_wrong_model_for_an_event_is_refused() -> None:
    with pytest.raises(TypeError, match="event shipped takes Shipped, not Plain"):
        encode_event("shipped", Shipped, Plain(value=1))


def test_undeclared_events_keep_their_old_encoding() -> None:
    assert encode_event("free", None, {"a": 1}) == (None, {"content-type": "application/json"})
    assert encode_event("free", None, b"raw") == (None, {})
    # a model of an undeclared event is still JSON; an Event names its version
    assert encode_event("free", None, Plain(value=1)) == (
        b'{"value":1}',
        {"content-type": "application/json"},
    )


def test_a_refusal_names_fields_and_rules_never_the_values() -> None:
    payload = json.dumps({"order_id": -12345, "carrier": 987654, "weight": "ABCDEF"}).encode()
    with pytest.raises(InvalidEvent) as refused:
        decode_event(Shipped, "shipped", payload)
    reason = str(refused.value)
    assert reason.startswith("malformed shipped payload: order_id: ")
    assert "carrier: Input should be a valid string" in reason
    for value in ("-12345", "987654", "ABCDEF"):
        assert value not in reason


def test_many_errors_are_summed_up_after_five() -> None:
    class Wide(BaseModel):
        a: int
        b: int
        c: int
        d: int
        e: int
        f: int
        g: int

    with pytest.raises(InvalidEvent) as refused:
        decode_event(Wide, "wide", b"{}")
    assert str(refused.value).endswith("e: Field required; and 2 more")
    assert str(refused.value).count("Field required") == 5


class ShippedHandler(EventHandler[Shipped]):
    async def handle_event(self, item: ItemRecord, event: Shipped, session: Any) -> None:
        return None


def _item(event_name: str = "shipped") -> ItemRecord:
    import datetime as dt
    import uuid

    return ItemRecord(
        id=1,
        uuid=uuid.uuid4(),
        box="b",
        event_name=event_name,
        event_key="k",
        bucket=0,
        headers={},
        errors_count=0,
        created_at=dt.datetime.now(dt.UTC),
    )


def test_an_event_handler_takes_its_model_from_the_type_argument() -> None:
    assert ShippedHandler.model is Shipped
    handler = ShippedHandler()
    parsed = handler.parse(_item(), b'{"order_id": 3, "carrier": "c", "weight": 0.1}')
    assert parsed == Shipped(order_id=3, carrier="c", weight=Decimal("0.1"))
    with pytest.raises(
        PermanentFailure, match=r"^malformed shipped payload: carrier: Field required$"
    ):
        handler.parse(_item(), b'{"order_id": 3, "weight": 1}')


def test_the_registry_refuses_a_handler_whose_model_the_box_does_not_declare(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(InboxItem, "event_types", EventTypes(legacy=Plain, shipped=Plain))
    handler = {
        "class": f"{ShippedHandler.__module__}:{ShippedHandler.__qualname__}",
        "event_name": "shipped",
    }
    with pytest.raises(ConfigError, match=r"ShippedHandler takes Shipped, but .* declares Plain"):
        make_registry(inbox={"transports": [handler]})
    unbound = {"class": handler["class"]}
    with pytest.raises(ConfigError, match="bind it to the one event it takes"):
        make_registry(inbox={"transports": [unbound]})
    monkeypatch.setattr(InboxItem, "event_types", EventTypes(Shipped))
    box = make_registry(inbox={"transports": [handler]}).get(INBOX_BOX)
    assert box.event_types.model_for("shipped") is Shipped


def test_event_types_must_be_declared_with_event_types(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(InboxItem, "event_types", {"shipped": Shipped})
    with pytest.raises(ConfigError, match=r"event_types must be an EventTypes\(...\)"):
        make_registry()
