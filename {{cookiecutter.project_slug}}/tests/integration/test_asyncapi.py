"""The AsyncAPI document: valid against the official AsyncAPI 3.0.0 JSON Schema, published
in the repository as the generator writes it, served by the API, and true to the wire: a
message the relay really sends to Kafka matches its message's headers and payload schemas."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, ClassVar

import httpx
import jsonschema  # type: ignore[import-untyped]
import pytest

from {{ cookiecutter.package_name }} import __version__
from {{ cookiecutter.package_name }}.api.app import create_app
from {{ cookiecutter.package_name }}.container import Container, shutdown
from {{ cookiecutter.package_name }}.contract import SERVICE
from {{ cookiecutter.package_name }}.settings import Settings
from outbox_engine.contracts.asyncapi import ServiceInfo, build_document
from outbox_engine.contracts.events import Event, EventTypes
from outbox_engine.contracts.publish import PUBLISHED, load_registry, render
from outbox_engine.creation.items import Outbox

from ..support import (
    OUTBOX_BOX,
    PROJECT_ROOT,
    OutboxItem,
    make_registry,
    read_topic,
    running_worker,
    wait_for,
)

SCHEMA = json.loads(
    (Path(__file__).parents[1] / "contracts" / "asyncapi-3.0.0.schema.json").read_text()
)
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)


def errors(document: dict[str, Any]) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}"
        for e in VALIDATOR.iter_errors(document)
    ]


class Shipped(Event):
    """An order left the warehouse."""

    event_name: ClassVar[str] = "shipped"
    schema_version: ClassVar[int] = 2
    order_id: int
    parcels: list[str]
    note: str | None = None


def test_the_document_is_valid_asyncapi_3_and_the_schema_has_teeth() -> None:
    document = build_document(load_registry(), SERVICE)
    assert errors(document) == []
    assert document["asyncapi"] == "3.0.0"
    wrong = copy.deepcopy(document)
    operation = next(iter(wrong["operations"].values()))
    operation["action"] = "publish"  # AsyncAPI 2 wording
    wrong["channels"]["x y"] = {"address": 1}
    found = errors(wrong)
    assert len(found) >= 2, found


def test_the_published_document_is_what_the_generator_writes() -> None:
    assert PUBLISHED == PROJECT_ROOT / "contracts" / "asyncapi.json"
    stale = "contracts/asyncapi.json is stale: write it with the asyncapi command, commit it"
    assert PUBLISHED.read_text() == render(build_document(load_registry(), SERVICE)), stale


def test_every_box_is_an_operation_on_its_topics() -> None:
    registry = load_registry()
    document = build_document(registry, SERVICE)
    routes = {
        (op["action"], document["channels"][op["channel"]["$ref"].split("/")[-1]]["address"])
        for op in document["operations"].values()
    }
    expected = {
        ("send", getattr(b.transports[0].transport, "topic", None))
        for b in registry.select(None, "outbox")
    }
    expected |= {
        ("receive", topic)
        for b in registry.select(None, "inbox")
        for topic in b.inbox_config.topics
    }
    assert routes == expected
    assert len(routes) == 2


async def test_the_api_serves_the_running_services_document(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("{{ cookiecutter.outbox_item.upper() }}_EVENTS_TOPIC", "deployed-topic")
    container = Container()
    container.settings.override(settings.model_copy(update={"api_docs": True}))
    hidden = Container()
    hidden.settings.override(settings.model_copy(update={"api_docs": False}))
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(hidden)), base_url="http://test"
        ) as client:
            assert (await client.get("/asyncapi.json")).status_code == 404  # API_DOCS=false
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(container)), base_url="http://test"
        ) as client:
            response = await client.get("/asyncapi.json")
            again = await client.get("/asyncapi.json")
    finally:
        await shutdown(container)
        await shutdown(hidden)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    served = response.json()
    assert again.json() == served
    assert errors(served) == []
    assert served == build_document(
        container.registry(), ServiceInfo(settings.service_name, __version__)
    )
    addresses = {channel["address"] for channel in served["channels"].values()}
    assert "deployed-topic" in addresses
    assert "deployed-topic" not in PUBLISHED.read_text()  # the published one has defaults


async def test_a_relayed_message_matches_its_documented_headers_and_payload(
    container: Container, env_topics: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    container.registry()  # the session's registry keeps the declared models, built first
    monkeypatch.setattr(OutboxItem, "event_types", EventTypes(Shipped))
    registry = make_registry()
    document = build_document(registry, SERVICE)
    assert errors(document) == []
    message = document["components"]["messages"][f"{OUTBOX_BOX}.shipped"]
    assert message["x-schema-version"] == 2
    assert message["summary"] == "An order left the warehouse."
    assert message["bindings"]["kafka"]["key"]["type"] == "string"
    outbox = Outbox(registry)
    async with container.session_factory()() as session, session.begin():
        for n in range(3):
            await outbox.create(
                session,
                OutboxItem,
                event_key=f"order-{n}",
                payload=Shipped(order_id=n, parcels=["p"] * n),
            )
    async with running_worker(container, registry, boxes=[OUTBOX_BOX]):
        await wait_for(lambda: _all_delivered(container), within=30)
    received = read_topic(container.settings().kafka_bootstrap_servers, env_topics, 3)
    assert len(received) == 3
    payload_schema = {**message["payload"], "components": document["components"]}
    for record in received:
        jsonschema.validate(record.headers, message["headers"])
        jsonschema.validate(json.loads(record.value), payload_schema)
        assert record.headers["schema-version"] == "2"
        assert record.headers["content-type"] == "application/json"
        assert record.key.startswith("order-")
    assert sorted(json.loads(r.value)["order_id"] for r in received) == [0, 1, 2]
    # and a payload the schema refuses is refused: the check has teeth
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"order_id": "one", "parcels": []}, payload_schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**received[0].headers, "event-name": "other"}, message["headers"])


async def _all_delivered(container: Container) -> bool:
    from sqlalchemy import select

    from outbox_engine.store.status import ItemStatus

    async with container.session_factory()() as session:
        statuses = (await session.execute(select(OutboxItem.status))).scalars().all()
    return len(statuses) == 3 and all(s == ItemStatus.DELIVERED for s in statuses)
