"""Breaking-change check: a published AsyncAPI document against the current one.

Both sides of a topic live with the contract for a long time: consumers that have not been
updated read new messages, and updated consumers read old ones (a replay, a lagging
partition). So a change is compatible only when it works both ways (what schema registries
call FULL compatibility), whichever side of the topic this service is on:

| change | verdict |
| --- | --- |
| a field added, optional | compatible |
| an event added, a channel (topic) added | compatible |
| a field removed | breaking: readers of it get nothing |
| a field's type, format or allowed values changed | breaking |
| a field added as required, or an optional field made required | breaking: old messages lack it |
| a required field made optional | breaking: readers that rely on it get nothing |
| an event removed, a channel removed | breaking |
| the Kafka key changed (added, removed, retyped), the content type changed | breaking |

The check reads only the two documents (operations, their channels' addresses, their
messages by `name`, payload schemas with `$ref`s resolved), so it runs without the database
or Kafka, in CI, against the document kept in the repository.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_DEPTH = 32


@dataclass(frozen=True, order=True)
class Change:
    """One difference: where (operation and event), what, and whether it breaks."""

    where: str
    what: str
    breaking: bool

    def __str__(self) -> str:
        return f"{'BREAKING' if self.breaking else 'compatible'}: {self.where}: {self.what}"


def compare(published: dict[str, Any], current: dict[str, Any]) -> list[Change]:
    """Every change from `published` to `current`, breaking ones first."""
    old, new = _Doc(published), _Doc(current)
    old_ops, new_ops = old.operations(), new.operations()
    changes: list[Change] = []
    for route, old_events in old_ops.items():
        where = f"{route[0]} {route[1]}"
        new_events = new_ops.get(route)
        if new_events is None:
            changes.append(Change(where, "channel removed (no longer " + _gerund(route[0]), True))
            continue
        for name, old_message in old_events.items():
            event_where = f"{where} {name}"
            new_message = new_events.get(name)
            if new_message is None:
                changes.append(Change(event_where, "event removed", True))
                continue
            changes += _compare_messages(event_where, old, old_message, new, new_message)
        changes += [
            Change(f"{where} {name}", "event added", False)
            for name in new_events
            if name not in old_events
        ]
    changes += [
        Change(f"{route[0]} {route[1]}", "channel added", False)
        for route in new_ops
        if route not in old_ops
    ]
    return sorted(changes, key=lambda c: (not c.breaking, c.where, c.what))


def _gerund(action: str) -> str:
    return ("sent" if action == "send" else "received") + ")"


class _Doc:
    """A document with its local `$ref`s resolvable."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document

    def resolve(self, node: Any) -> Any:
        for _ in range(MAX_DEPTH):
            if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
                return node
            node = self._pointer(node["$ref"])
        raise ValueError("$ref chain too deep")

    def _pointer(self, ref: str) -> Any:
        if not ref.startswith("#/"):
            raise ValueError(f"only local references are supported, not {ref!r}")
        node: Any = self.document
        for part in ref[2:].split("/"):
            key = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or key not in node:
                raise ValueError(f"unresolvable reference {ref!r}")
            node = node[key]
        return node

    def operations(self) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
        """(action, channel address) -> event name -> message."""
        found: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        for operation in (self.document.get("operations") or {}).values():
            operation = self.resolve(operation)
            channel = self.resolve(operation.get("channel") or {})
            route = (str(operation.get("action")), str(channel.get("address")))
            events = found.setdefault(route, {})
            for reference in operation.get("messages") or []:
                message = self.resolve(reference)
                events[str(message.get("name"))] = message
        return found


def _compare_messages(
    where: str, old: _Doc, old_message: dict[str, Any], new: _Doc, new_message: dict[str, Any]
) -> list[Change]:
    changes: list[Change] = []
    old_type = old_message.get("contentType")
    new_type = new_message.get("contentType")
    if old_type != new_type:
        changes.append(Change(where, f"content type changed from {old_type} to {new_type}", True))
    old_key = _key(old, old_message)
    new_key = _key(new, new_message)
    if _signature(old, old_key) != _signature(new, new_key):
        changes.append(
            Change(
                where,
                f"Kafka key changed from {_describe_key(old, old_key)} to "
                f"{_describe_key(new, new_key)}",
                True,
            )
        )
    old_payload, new_payload = old_message.get("payload"), new_message.get("payload")
    if old_payload is None and new_payload is None:
        return changes
    if old_payload is None or new_payload is None:
        what = "payload schema added" if old_payload is None else "payload schema removed"
        return [*changes, Change(where, what, old_payload is not None)]
    _compare_schema(where, "", old, old_payload, new, new_payload, changes, 0)
    return changes


def _key(doc: _Doc, message: dict[str, Any]) -> Any:
    bindings = doc.resolve(message.get("bindings") or {})
    kafka = doc.resolve(bindings.get("kafka") or {})
    return kafka.get("key")


def _describe_key(doc: _Doc, key: Any) -> str:
    if key is None:
        return "none"
    return "/".join(sorted(_signature(doc, key)[0])) or "any"


def _signature(doc: _Doc, schema: Any) -> tuple[frozenset[str], str | None, str | None]:
    """What a value of the schema may be: its JSON types, format and allowed values."""
    if schema is None:
        return frozenset({"absent"}), None, None
    schema = doc.resolve(schema)
    if not isinstance(schema, dict):
        return frozenset({"any"} if schema is True else {"none"}), None, None
    types: set[str] = set()
    declared = schema.get("type")
    if isinstance(declared, str):
        types.add(declared)
    elif isinstance(declared, list):
        types.update(str(t) for t in declared)
    for keyword in ("anyOf", "oneOf"):
        for member in schema.get(keyword) or []:
            types.update(_signature(doc, member)[0])
    if not types and ("properties" in schema):
        types.add("object")
    if "const" in schema:
        allowed: str | None = repr([schema["const"]])
    elif "enum" in schema:
        allowed = repr(sorted(schema["enum"], key=repr))
    else:
        allowed = None
    fmt = schema.get("format")
    return frozenset(types or {"any"}), fmt if isinstance(fmt, str) else None, allowed


def _object_member(doc: _Doc, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The object schema of `schema` (itself, or its one object member of anyOf/oneOf)."""
    if "properties" in schema:
        return schema
    members = [doc.resolve(m) for k in ("anyOf", "oneOf") for m in schema.get(k) or []]
    objects = [m for m in members if isinstance(m, dict) and "properties" in m]
    return objects[0] if len(objects) == 1 else None


def _compare_schema(
    where: str,
    path: str,
    old: _Doc,
    old_schema: Any,
    new: _Doc,
    new_schema: Any,
    changes: list[Change],
    depth: int,
) -> None:
    if depth > MAX_DEPTH:
        return
    field = f"field {path}" if path else "payload"
    old_schema, new_schema = old.resolve(old_schema), new.resolve(new_schema)
    old_sig, new_sig = _signature(old, old_schema), _signature(new, new_schema)
    if old_sig != new_sig:
        changes.append(
            Change(where, f"{field}: type changed from {_show(old_sig)} to {_show(new_sig)}", True)
        )
        return
    if not (isinstance(old_schema, dict) and isinstance(new_schema, dict)):
        return
    old_object, new_object = _object_member(old, old_schema), _object_member(new, new_schema)
    if old_object is not None and new_object is not None:
        old_props = old_object.get("properties") or {}
        new_props = new_object.get("properties") or {}
        old_required = set(old_object.get("required") or [])
        new_required = set(new_object.get("required") or [])
        prefix = f"{path}." if path else ""
        for name, old_prop in old_props.items():
            sub = f"{prefix}{name}"
            if name not in new_props:
                changes.append(Change(where, f"field {sub}: removed", True))
                continue
            if name in old_required and name not in new_required:
                changes.append(Change(where, f"field {sub}: no longer required", True))
            elif name in new_required and name not in old_required:
                changes.append(Change(where, f"field {sub}: now required", True))
            _compare_schema(where, sub, old, old_prop, new, new_props[name], changes, depth + 1)
        for name in new_props:
            if name not in old_props:
                required = name in new_required
                what = "added, required" if required else "added, optional"
                changes.append(Change(where, f"field {prefix}{name}: {what}", required))
    old_items, new_items = old_schema.get("items"), new_schema.get("items")
    if isinstance(old_items, dict) and isinstance(new_items, dict):
        _compare_schema(
            where, f"{path}[]" if path else "[]", old, old_items, new, new_items, changes, depth + 1
        )


def _show(signature: tuple[frozenset[str], str | None, str | None]) -> str:
    types, fmt, allowed = signature
    text = "|".join(sorted(types))
    if fmt:
        text += f" ({fmt})"
    if allowed:
        text += f" in {allowed}"
    return text
