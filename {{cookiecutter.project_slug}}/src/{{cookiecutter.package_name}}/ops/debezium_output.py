"""What the Debezium commands (debezium_commands.py) print: the connector document,
the status of a box as JSON and as one line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from outbox_engine.debezium.connector import DebeziumNames
    from outbox_engine.debezium.status import BoxCaptureStatus


def config_document(names: DebeziumNames, database_url: str) -> dict[str, Any]:
    """The connector as Kafka Connect's `POST /connectors` takes it."""
    from outbox_engine.debezium.connector import connector_config

    return {"name": names.connector, "config": connector_config(names, database_url)}


def status_json(status: BoxCaptureStatus, capture_rows: int) -> dict[str, Any]:
    slot = status.slot
    return {
        "box": status.box,
        "relay": status.relay,
        "trigger": status.captured,
        "topic": status.topic,
        "pending": status.pending,
        "capture_rows": capture_rows,
        "slot": {
            "exists": slot.exists,
            "active": slot.active,
            "lag_bytes": slot.lag_bytes,
            "confirmed_flush_lsn": slot.confirmed_flush_lsn,
            "wal_status": slot.wal_status,
        },
        "problems": list(status.problems),
    }


def status_line(found: dict[str, Any], slot_name: str) -> str:
    slot = found["slot"]
    if not slot["exists"]:
        where = f"slot {slot_name} missing"
    else:
        streaming = "active" if slot["active"] else "inactive"
        where = f"slot {slot_name} {streaming}, lag {slot['lag_bytes'] or 0} bytes"
    trigger = f"trigger -> {found['topic']}" if found["trigger"] else "no trigger"
    verdict = "; ".join(found["problems"]) or "ok"
    return (
        f"{found['box']}\trelay {found['relay']}\t{trigger}\t{where}\t"
        f"{found['capture_rows']} capture rows\t{found['pending']} pending\t{verdict}"
    )
