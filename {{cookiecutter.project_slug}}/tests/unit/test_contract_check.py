"""The breaking-change check: each kind of model change, made to real event models and run
through the document generator, gives exactly the changes it should; `asyncapi --check`
exits 1 on breaking ones only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest
from pydantic import BaseModel

from {{ cookiecutter.package_name }}.contract import SERVICE
from outbox_engine.contracts import publish
from outbox_engine.contracts.asyncapi import build_document
from outbox_engine.contracts.check import compare
from outbox_engine.contracts.events import Event, EventTypes
from outbox_engine.contracts.publish import render

from ..support import OUTBOX_BOX, InboxItem, OutboxItem, make_registry

TOPIC = "{{ cookiecutter.outbox_item }}s"  # the default topics of config/boxes.yaml
SEND = f"send {TOPIC}"
RECEIVE = "receive {{ cookiecutter.inbox_item }}s"


class Address(BaseModel):
    city: str
    zip: str


class Created(Event):
    event_name: ClassVar[str] = "thing_created"
    id: int
    name: str
    size: Literal["s", "m", "l"]
    address: Address
    tags: list[str]
    note: str | None = None


class Refund(Event):
    event_name: ClassVar[str] = "refund"
    order_id: int
    amount: float


def document(
    monkeypatch: pytest.MonkeyPatch,
    outbox: tuple[type[Event], ...] = (Created,),
    inbox: tuple[type[Event], ...] = (Refund,),
    outbox_config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    monkeypatch.setattr(OutboxItem, "event_types", EventTypes(*outbox))
    monkeypatch.setattr(InboxItem, "event_types", EventTypes(*inbox))
    loaded: dict[str, Any] = json.loads(
        render(build_document(make_registry(outbox=outbox_config), SERVICE))
    )
    return loaded


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return [str(change) for change in compare(old, new)]


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    return document(monkeypatch)


def variant(title: str, base: type[Event], /, **fields: Any) -> type[Event]:
    """A model like `base` with fields added or replaced (annotation, default)."""
    annotations = {**base.__annotations__, **{k: v[0] for k, v in fields.items()}}
    namespace: dict[str, Any] = {"__annotations__": annotations, "__module__": __name__}
    namespace.update({k: v[1] for k, v in fields.items() if len(v) > 1})
    for field_name, info in base.model_fields.items():
        if field_name not in fields and not info.is_required():
            namespace[field_name] = info.default
    namespace["event_name"] = base.event_name
    return type(title, (Event,), namespace)


def test_the_same_models_make_no_change(
    monkeypatch: pytest.MonkeyPatch, published: dict[str, Any]
) -> None:
    assert changes(published, document(monkeypatch)) == []


def test_a_new_optional_field_and_a_new_event_are_compatible(
    monkeypatch: pytest.MonkeyPatch, published: dict[str, Any]
) -> None:
    wider = variant("Created", Created, colour=("str | None", None))

    class Deleted(Event):
        event_name: ClassVar[str] = "thing_deleted"
        id: int

    current = document(monkeypatch, outbox=(wider, Deleted))
    assert changes(published, current) == [
        f"compatible: {SEND} thing_created: field colour: added, optional",
        f"compatible: {SEND} thing_deleted: event added",
    ]


def test_removed_retyped_and_newly_required_fields_break(
    monkeypatch: pytest.MonkeyPatch, published: dict[str, Any]
) -> None:
    class Changed(Event):
        event_name: ClassVar[str] = "thing_created"
        id: str  # retyped
        # name removed
        size: Literal["s", "m"]  # fewer values
        address: Address
        tags: list[int]  # items retyped
        note: str  # now required
        weight: float  # new and required

    assert changes(published, document(monkeypatch, outbox=(Changed,))) == [
        f"BREAKING: {SEND} thing_created: field id: type changed from integer to string",
        f"BREAKING: {SEND} thing_created: field name: removed",
        f"BREAKING: {SEND} thing_created: field note: now required",
        f"BREAKING: {SEND} thing_created: field note: type changed from null|string to string",
        f"BREAKING: {SEND} thing_created: field size: type changed from string in "
        "['l', 'm', 's'] to string in ['m', 's']",
        f"BREAKING: {SEND} thing_created: field tags[]: type changed from string to integer",
        f"BREAKING: {SEND} thing_created: field weight: added, required",
    ]


def test_a_change_inside_a_nested_model_is_named_by_its_path(
    monkeypatch: pytest.MonkeyPatch, published: dict[str, Any]
) -> None:
    class Address(BaseModel):  # same name, zip gone, street added as optional
        city: str
        street: str | None = None

    moved = variant("Created", Created, address=(Address,))
    assert changes(published, document(monkeypatch, outbox=(moved,))) == [
        f"BREAKING: {SEND} thing_created: field address.zip: removed",
        f"compatible: {SEND} thing_created: field address.street: added, optional",
    ]


def test_a_required_field_made_optional_breaks_readers(
    monkeypatch: pytest.MonkeyPatch, published: dict[str, Any]
) -> None:
    loose = variant("Created", Created, name=("str", "unnamed"))
    assert changes(published, document(monkeypatch, outbox=(loose,))) == [
        f"BREAKING: {SEND} thing_created: field name: no longer required"
    ]


def test_removed_events_and_channels_and_a_changed_key_break(
    monkeypatch: pytest.MonkeyPatch, published: dict[str, Any]
) -> None:
    assert changes(published, document(monkeypatch, outbox=())) == [
        f"BREAKING: {SEND} thing_created: event removed"
    ]
    kafka = make_registry().get(OUTBOX_BOX).config.transports[0]
    moved = {"transports": [{"class": kafka.class_path, "args": {"topic": "things"}}]}
    assert changes(published, document(monkeypatch, outbox_config=moved)) == [
        f"BREAKING: {SEND}: channel removed (no longer sent)",
        "compatible: send things: channel added",
    ]
    unkeyed = {
        "transports": [{"class": kafka.class_path, "args": {"topic": TOPIC, "key_from": "none"}}]
    }
    assert changes(published, document(monkeypatch, outbox_config=unkeyed)) == [
        f"BREAKING: {SEND} thing_created: Kafka key changed from string to none"
    ]


def test_the_inbox_side_is_checked_by_the_same_rules(
    monkeypatch: pytest.MonkeyPatch, published: dict[str, Any]
) -> None:
    class Refund(Event):
        event_name: ClassVar[str] = "refund"
        order_id: int
        amount: float
        reason: str  # producers that do not send it are refused now

    assert changes(published, document(monkeypatch, inbox=(Refund,))) == [
        f"BREAKING: {RECEIVE} refund: field reason: added, required"
    ]
    assert changes(published, document(monkeypatch, inbox=())) == [
        f"BREAKING: {RECEIVE} refund: event removed"
    ]


def test_check_exits_1_on_breaking_changes_and_0_on_compatible_ones(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    published_file = tmp_path / "contracts" / "asyncapi.json"
    monkeypatch.setattr(OutboxItem, "event_types", EventTypes(Created))
    monkeypatch.setattr(InboxItem, "event_types", EventTypes(Refund))
    assert publish.main(SERVICE, published_file) == 0
    assert json.loads(published_file.read_text()) == document(monkeypatch)
    assert publish.main(SERVICE, published_file, check=True) == 0
    assert capsys.readouterr().out.endswith(f"no changes against {published_file}\n")

    monkeypatch.setattr(
        OutboxItem, "event_types", EventTypes(variant("Created", Created, more=("int", 0)))
    )
    assert publish.main(SERVICE, published_file, check=True) == 0
    out = capsys.readouterr().out
    assert f"compatible: {SEND} thing_created: field more: added, optional" in out
    assert "1 compatible change(s); publish them with `asyncapi`" in out

    class Created2(Event):
        event_name: ClassVar[str] = "thing_created"
        id: int

    monkeypatch.setattr(OutboxItem, "event_types", EventTypes(Created2))
    assert publish.main(SERVICE, published_file, check=True) == 1
    captured = capsys.readouterr()
    assert captured.out.count("BREAKING: ") == 5  # name, size, address, tags, note removed
    assert "5 breaking change(s)" in captured.err

    assert publish.main(SERVICE, tmp_path / "missing.json", check=True) == 2
    assert "no published document" in capsys.readouterr().err
