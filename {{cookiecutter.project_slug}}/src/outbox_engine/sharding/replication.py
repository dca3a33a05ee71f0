"""Automatic outboxes for models: mark a model replicated and every ORM insert, update and
delete of it emits an outbox item with a snapshot payload, in the same flush.

    @replicated(THING_UPDATE, OrderOutboxItem)
    class Thing(Base): ...

The item's category is the event name, its shard identifier (inferred from the category's
scope, or by `shard_identifier=`) the partition key, and the row's primary key its object
identifier. Bulk `update()`/`delete()` statements bypass the ORM's unit of work and so emit
nothing: the write guard (guard.py) catches them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import event, inspect
from sqlalchemy.orm import Session

from outbox_engine.config.registry import Box, BoxRegistry
from outbox_engine.creation.chain import chain_headers
from outbox_engine.creation.ids import new_message_id
from outbox_engine.creation.items import encode_payload
from outbox_engine.creation.shards import Category, infer_shard_identifier, shard_headers
from outbox_engine.store.inserts import insert_and_wake

Model = TypeVar("Model", bound=type[Any])


@dataclass(frozen=True)
class Replication:
    category: Category
    item_class: type[Any]
    shard_identifier: Callable[[Any], str | int] | None = None
    payload: Callable[[Any], dict[str, Any]] | None = None

    def shard_of(self, instance: Any) -> str:
        if self.shard_identifier is not None:
            return str(self.shard_identifier(instance))
        return infer_shard_identifier(self.category.scope, instance)


REPLICATED: dict[type[Any], Replication] = {}
_registry: list[BoxRegistry] = []


def replicated(
    category: Category,
    item_class: type[Any],
    *,
    shard_identifier: Callable[[Any], str | int] | None = None,
    payload: Callable[[Any], dict[str, Any]] | None = None,
) -> Callable[[Model], Model]:
    def mark(model: Model) -> Model:
        REPLICATED[model] = Replication(category, item_class, shard_identifier, payload)
        return model

    return mark


def replicated_tables() -> set[str]:
    return {model.__table__.name for model in REPLICATED}


def snapshot(instance: Any) -> dict[str, Any]:
    """Every column attribute of the row, as the payload of its item."""
    return {attr.key: getattr(instance, attr.key) for attr in inspect(type(instance)).column_attrs}


def object_identifier(instance: Any) -> str:
    # In a flush the new row's key is set but its identity is not yet registered.
    identity = inspect(type(instance)).primary_key_from_instance(instance)
    if not identity or any(part is None for part in identity):
        raise ValueError(f"{type(instance).__name__} has no primary key yet")
    return ":".join(str(part) for part in identity)


def item_rows(
    registry: BoxRegistry, pairs: Iterable[tuple[Any, str]]
) -> list[tuple[Box, list[dict[str, Any]]]]:
    """Outbox rows per box for (instance, operation) pairs of replicated models."""
    boxes: dict[str, Box] = {}
    rows: dict[str, list[dict[str, Any]]] = {}
    for instance, operation in pairs:
        replication = REPLICATED[type(instance)]
        box = registry.for_item_class(replication.item_class)
        key = replication.shard_of(instance)
        object_id = object_identifier(instance)
        if operation == "delete":
            body: dict[str, Any] = {"deleted": True, "object_id": object_id}
        else:
            body = (replication.payload or snapshot)(instance)
        message_id = new_message_id()
        boxes[box.name] = box
        rows.setdefault(box.name, []).append(
            {
                "uuid": message_id,
                "event_name": replication.category.name,
                "event_key": key,
                "bucket": box.bucket_for(key),
                "payload": encode_payload({"operation": operation, "object": body}),
                "headers": {
                    **shard_headers(replication.category, object_id),
                    **chain_headers(message_id),
                    "operation": operation,
                },
            }
        )
    return [(boxes[name], box_rows) for name, box_rows in rows.items()]


def _emit(session: Session, _flush_context: object) -> None:
    if not REPLICATED or not _registry:
        return
    pairs = [
        *((obj, "insert") for obj in session.new if type(obj) in REPLICATED),
        *(
            (obj, "update")
            for obj in session.dirty
            if type(obj) in REPLICATED and session.is_modified(obj, include_collections=False)
        ),
        *((obj, "delete") for obj in session.deleted if type(obj) in REPLICATED),
    ]
    if not pairs:
        return
    connection = session.connection()
    for box, rows in item_rows(_registry[-1], pairs):
        insert_and_wake(connection, box.table, rows, box.channel)


def install_replication(registry: BoxRegistry) -> None:
    """Emit items for replicated models on every flush of every session (idempotent)."""
    _registry[:] = [registry]
    if not event.contains(Session, "after_flush", _emit):
        event.listen(Session, "after_flush", _emit)
