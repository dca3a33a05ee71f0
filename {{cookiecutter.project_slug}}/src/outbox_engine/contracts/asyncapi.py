"""The service's AsyncAPI 3.0 document, generated from the boxes and their event models.

* a channel per Kafka topic: the topics of the outbox boxes' Kafka transports (`args.topic`)
  and the inbox boxes' `topics`;
* an operation per box and topic: `send` for an outbox box, `receive` for an inbox box (with
  its consumer group as Kafka binding);
* a message per event: its payload schema is the pydantic model's JSON Schema (what the
  model writes for `send`, what it accepts for `receive`), its headers those the engine adds
  (`message-id`, `event-name`, `created-at`, chain, `content-type`, `schema-version`, trace
  context), its Kafka binding the key (the event key) unless the transport sends none.

Events are those the item class declares (`event_types`) and, for an inbox box, those its
`EventHandler`s parse; a transport bound to an undeclared event gives a message without a
payload schema. Non-Kafka transports (webhooks, logs) are not channels and are left out.

The API serves the running service's document at `GET /asyncapi.json` (its configuration as
deployed); contracts/publish.py writes and checks the published file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from outbox_engine.config.registry import Box, BoxRegistry
from outbox_engine.contracts.events import JSON_CONTENT_TYPE, schema_version
from outbox_engine.transports.base import EventHandler
from outbox_engine.transports.builtin import KafkaTransport

ASYNCAPI_VERSION = "3.0.0"
KAFKA_BINDING_VERSION = "0.5.0"
_COMPONENT_NAME = re.compile(r"[^A-Za-z0-9.\-_]")

Action = Literal["send", "receive"]


@dataclass(frozen=True)
class ServiceInfo:
    """The service the document describes: its name (the title) and version."""

    name: str
    version: str


_VERB = {"send": "relays its items to", "receive": "consumes"}
# event name -> its model (None: no model declared)
Events = dict[str, type[BaseModel] | None]


def _outbox_routes(box: Box) -> list[tuple[str, bool, Events]]:
    """(topic, keyed, events) of each Kafka transport of an outbox box."""
    routes = []
    declared = box.event_types.items()
    for bound in box.transports:
        transport = bound.transport
        if not isinstance(transport, KafkaTransport):
            continue
        events: Events = {
            name: model for name, model in declared if bound.event_name in (None, name)
        }
        if bound.event_name is not None and bound.event_name not in events:
            events[bound.event_name] = None
        routes.append((transport.topic, transport.key_from == "event_key", events))
    return routes


def _inbox_events(box: Box) -> Events:
    events: Events = dict(box.event_types.items())
    for bound in box.transports:
        if bound.event_name is None or bound.event_name in events:
            continue
        transport = bound.transport
        events[bound.event_name] = transport.model if isinstance(transport, EventHandler) else None
    return events


def _headers(action: Action, event_name: str, model: type[BaseModel] | None) -> dict[str, Any]:
    text = {"type": "string"}
    properties: dict[str, Any] = {
        "message-id": {
            **text,
            "format": "uuid",
            "description": "the message id; receivers deduplicate by it",
        },
        "event-name": {**text, "const": event_name},
        "created-at": {**text, "format": "date-time"},
        "correlation-id": {**text, "description": "the id of the first message of the chain"},
        "causation-id": {**text, "description": "the id of the message that caused this one"},
        "hop": {**text, "pattern": "^[0-9]+$", "description": "messages since the chain began"},
        "content-type": {**text, "const": JSON_CONTENT_TYPE},
        "traceparent": {**text, "description": "W3C trace context"},
        "tracestate": text,
    }
    if model is not None:
        properties["schema-version"] = {**text, "const": str(schema_version(model))}
    if action == "receive":
        required = ["event-name"]
    else:
        required = ["message-id", "event-name", "created-at", "correlation-id", "hop"]
        if model is not None:
            required += ["content-type", "schema-version"]
    return {"type": "object", "properties": properties, "required": required}


def build_document(registry: BoxRegistry, service: ServiceInfo) -> dict[str, Any]:
    """The AsyncAPI 3.0 document of these boxes, as a JSON-ready dict."""
    plan: list[tuple[Box, Action, str, bool, Events]] = []
    for box in registry:
        if box.kind == "outbox":
            plan += [(box, "send", t, keyed, ev) for t, keyed, ev in _outbox_routes(box)]
        else:
            events = _inbox_events(box)
            plan += [(box, "receive", t, True, events) for t in box.inbox_config.topics]
    wanted: dict[tuple[type[BaseModel], JsonSchemaMode], None] = {}
    for _box, action, _topic, _keyed, events in plan:
        mode: JsonSchemaMode = "serialization" if action == "send" else "validation"
        wanted.update({(model, mode): None for model in events.values() if model is not None})
    refs, definitions = models_json_schema(
        list(wanted), ref_template="#/components/schemas/{model}"
    )
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    for box, action, topic, keyed, events in plan:
        channel_id = _COMPONENT_NAME.sub("_", topic)
        channel = channels.setdefault(
            channel_id,
            {
                "address": topic,
                "messages": {},
                "bindings": {"kafka": {"topic": topic, "bindingVersion": KAFKA_BINDING_VERSION}},
            },
        )
        operation_messages = []
        for event_name, model in events.items():
            message_id = _COMPONENT_NAME.sub("_", f"{box.name}.{event_name}")
            if not keyed:
                message_id += ".unkeyed"
            if message_id not in messages:
                messages[message_id] = _message(action, event_name, model, keyed, refs)
            channel["messages"][message_id] = {"$ref": f"#/components/messages/{message_id}"}
            operation_messages.append({"$ref": f"#/channels/{channel_id}/messages/{message_id}"})
        operation: dict[str, Any] = {
            "action": action,
            "channel": {"$ref": f"#/channels/{channel_id}"},
            "summary": f"box {box.name}: {_VERB[action]} {topic}",
            "messages": operation_messages,
            "x-box": box.name,
        }
        if action == "receive":
            group = box.inbox_config.group_id or f"{service.name}.{box.name}"
            operation["bindings"] = {
                "kafka": {
                    "groupId": {"type": "string", "enum": [group]},
                    "bindingVersion": KAFKA_BINDING_VERSION,
                }
            }
        operations[_COMPONENT_NAME.sub("_", f"{box.name}.{action}.{topic}")] = operation
    return {
        "asyncapi": ASYNCAPI_VERSION,
        "info": {
            "title": service.name,
            "version": service.version,
            "description": f"The events {service.name} sends and receives through Kafka "
            "(generated from config/boxes.yaml and the event models).",
        },
        "defaultContentType": JSON_CONTENT_TYPE,
        "channels": channels,
        "operations": operations,
        "components": {"messages": messages, "schemas": definitions.get("$defs", {})},
    }


def _message(
    action: Action,
    event_name: str,
    model: type[BaseModel] | None,
    keyed: bool,
    refs: Mapping[tuple[Any, JsonSchemaMode], dict[str, Any]],
) -> dict[str, Any]:
    mode: JsonSchemaMode = "serialization" if action == "send" else "validation"
    message: dict[str, Any] = {
        "name": event_name,
        "contentType": JSON_CONTENT_TYPE,
        "headers": _headers(action, event_name, model),
    }
    if model is not None:
        message["title"] = model.__name__
        doc = (model.__doc__ or "").strip()
        if doc and model.__doc__ != BaseModel.__doc__:
            message["summary"] = doc.splitlines()[0]
        message["payload"] = refs[(model, mode)]
        message["x-schema-version"] = schema_version(model)
    if keyed:
        message["bindings"] = {
            "kafka": {
                "key": {
                    "type": "string",
                    "description": "the event key: messages of one key keep their order",
                },
                "bindingVersion": KAFKA_BINDING_VERSION,
            }
        }
    return message
