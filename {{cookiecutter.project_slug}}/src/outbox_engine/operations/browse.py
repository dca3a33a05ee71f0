"""Reading items for an operator: a filtered page of a box, or one item in full (with its
payload only where the box allows it, through the box's redactor if it names one)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.config.registry import Box, import_object
from outbox_engine.operations.errors import NotFound, OpsError
from outbox_engine.operations.selection import Selection
from outbox_engine.store.browse import read_item, read_page
from outbox_engine.store.status import ItemStatus

MAX_PAGE = 500
Redactor = Callable[[str, bytes], str | bytes]


def _json(row: Mapping[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, datetime):
            value = value.isoformat()
        elif key == "uuid":
            value = str(value)
        elif key == "status":
            value = ItemStatus(value).name.lower()
        item[key] = value
    return item


async def list_items(
    engine: AsyncEngine, box: Box, selection: Selection, *, after_id: int = 0, limit: int = 50
) -> tuple[list[dict[str, Any]], int | None]:
    """A page of items in id order after `after_id`; the second value is the next cursor."""
    if not 1 <= limit <= MAX_PAGE:
        raise OpsError(f"limit must be 1-{MAX_PAGE}")
    rows = await read_page(engine, box.table_name, selection, after_id=after_id, limit=limit + 1)
    items = [_json(row) for row in rows]
    more = len(items) > limit
    items = items[:limit]
    return items, (items[-1]["id"] if more else None)


def _payload(box: Box, event_name: str, payload: bytes) -> str | None:
    if not box.config.admin_show_payload:
        return None
    if box.config.admin_redact:
        redact: Redactor = import_object(box.config.admin_redact, f"{box.name}.admin_redact")
        redacted = redact(event_name, payload)
        payload = redacted.encode() if isinstance(redacted, str) else redacted
    return payload.decode("utf-8", "replace")


async def get_item(engine: AsyncEngine, box: Box, item_id: int) -> dict[str, Any]:
    """One item with its headers, full last error and (if the box allows) its payload."""
    row = await read_item(engine, box.table_name, item_id)
    if row is None:
        raise NotFound(f"box {box.name} has no item {item_id}")
    item = _json({k: v for k, v in row.items() if k != "payload"})
    item["box"] = box.name
    item["payload_bytes"] = len(row["payload"])
    item["payload_shown"] = bool(box.config.admin_show_payload)
    item["payload"] = _payload(box, row["event_name"], bytes(row["payload"]))
    return item
