"""The Debezium connector of a service: one PostgreSQL connector, one publication, one slot.

`connector_config` is the whole configuration; `debezium-config` prints it and the compose
profile registers it. Why each group of settings:

* `pgoutput`, the service's own publication of the capture tables (inserts only) and its own
  slot, both created before the connector starts (store/slots.py), `snapshot.mode=no_data`:
  the slot, not a snapshot, decides what is sent; a switch copies what was pending.
* The Outbox Event Router maps a capture row to the message the worker would send: topic
  from `topic`, key from `event_key`, value the exact `payload` bytes
  (`binary.handling.mode=bytes` + ByteArrayConverter), and the headers from their columns in
  the worker's order. Its own `id` header and Debezium's context headers are dropped.
* Heartbeats: every 10 s the connector inserts a capture row addressed to the relay's
  heartbeat topic, so offsets are committed and the slot's confirmed position moves on
  when no item is captured (else the WAL of the database's other writes piles up behind an
  idle slot). Debezium's own heartbeat records (structs, not bytes) are filtered out.
* Throughput settings measured on this kind of machine (DESIGN notes): bigger batches and
  queue, a short poll, a producer that batches (linger 5 ms), is idempotent and retries
  through a Kafka outage of any length.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import unquote, urlsplit
from uuid import UUID

from outbox_engine.config.boxes import ConfigError
from outbox_engine.config.registry import Box
from outbox_engine.store.capture import CAPTURE_TABLE, HEADER_COLUMNS, heartbeat_sql
from outbox_engine.transports.base import ItemRecord

POSTGRES_CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"
EVENT_ROUTER = "io.debezium.transforms.outbox.EventRouter"
BYTE_ARRAY_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
HEARTBEAT_MS = 10_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class DebeziumNames:
    """What a service's Debezium relay is called: connector (Kafka Connect), slot and
    publication (PostgreSQL), topic prefix (Debezium's own topics, e.g. heartbeats)."""

    connector: str
    slot: str
    publication: str
    topic_prefix: str

    @property
    def heartbeat_topic(self) -> str:
        """Where the connector's heartbeats go (capture rows of their own, see
        store/capture.py): a topic of the relay, not of any box."""
        return f"{self.topic_prefix}.outbox-heartbeat"

    @classmethod
    def for_service(cls, slug: str, package: str) -> DebeziumNames:
        return cls(f"{slug}-outbox", f"{package}_outbox", f"{package}_outbox", package)


def _header_placement() -> str:
    columns = [
        ("message_id", "message-id"),
        ("event_name", "event-name"),
        ("created_at", "created-at"),
        *((column, header) for header, column in HEADER_COLUMNS),
    ]
    return ",".join(f"{column}:header:{header}" for column, header in columns)


def connector_config(
    names: DebeziumNames, database_url: str, schema: str = "public"
) -> dict[str, str]:
    """The connector's configuration; `database_url` is how Connect reaches PostgreSQL."""
    parts = urlsplit(database_url)
    if not parts.hostname or not parts.path.strip("/"):
        raise ConfigError(
            f"database URL {parts.scheme}://...{parts.path}: needs a host and a database"
        )
    prefix = names.topic_prefix.replace(".", r"\.")
    return {
        "connector.class": POSTGRES_CONNECTOR,
        "tasks.max": "1",
        "plugin.name": "pgoutput",
        "database.hostname": parts.hostname,
        "database.port": str(parts.port or 5432),
        "database.user": unquote(parts.username or ""),
        "database.password": unquote(parts.password or ""),
        "database.dbname": unquote(parts.path.strip("/")),
        "topic.prefix": names.topic_prefix,
        "slot.name": names.slot,
        "publication.name": names.publication,
        "publication.autocreate.mode": "disabled",
        "table.include.list": f"{schema}.{CAPTURE_TABLE}",
        "snapshot.mode": "no_data",
        "tombstones.on.delete": "false",
        "binary.handling.mode": "bytes",
        "key.converter": STRING_CONVERTER,
        "value.converter": BYTE_ARRAY_CONVERTER,
        "extended.headers.enabled": "false",
        "heartbeat.interval.ms": str(HEARTBEAT_MS),
        "heartbeat.action.query": heartbeat_sql(names.heartbeat_topic),
        "max.batch.size": "16384",
        "max.queue.size": "65536",
        "poll.interval.ms": "20",
        "producer.override.linger.ms": "5",
        "producer.override.batch.size": "524288",
        "producer.override.acks": "all",
        "producer.override.enable.idempotence": "true",
        # While Kafka is down the producer keeps retrying: with the default 2 minutes a
        # longer outage fails the task, and a failed task waits for a manual restart.
        "producer.override.delivery.timeout.ms": str(2**31 - 1),
        "predicates": "beats",
        "predicates.beats.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
        "predicates.beats.pattern": rf"__debezium-heartbeat\.{prefix}",
        "transforms": "beats,outbox,dropid",
        "transforms.beats.type": "org.apache.kafka.connect.transforms.Filter",
        "transforms.beats.predicate": "beats",
        "transforms.outbox.type": EVENT_ROUTER,
        "transforms.outbox.table.field.event.id": "message_id",
        "transforms.outbox.table.field.event.key": "event_key",
        "transforms.outbox.table.field.event.payload": "payload",
        "transforms.outbox.route.by.field": "topic",
        "transforms.outbox.route.topic.replacement": "${routedByValue}",
        "transforms.outbox.table.fields.additional.placement": _header_placement(),
        "transforms.dropid.type": "org.apache.kafka.connect.transforms.DropHeaders",
        "transforms.dropid.headers": "id",
    }


def debezium_topic(box: Box) -> str:
    """The one Kafka topic a Debezium box's items go to; ConfigError when the box's
    transports are not what Debezium can do (one plain KafkaTransport keyed by event_key)."""
    from outbox_engine.transports.builtin import KafkaTransport

    where = f"outbox.{box.name}"
    if box.kind != "outbox":
        raise ConfigError(f"{where}: only outbox boxes can be relayed by Debezium")
    if len(box.transports) != 1:
        raise ConfigError(
            f"{where}.transports: a box relayed by Debezium has exactly one transport "
            f"(a KafkaTransport), not {len(box.transports)}"
        )
    bound = box.transports[0]
    transport = bound.transport
    if not isinstance(transport, KafkaTransport):
        raise ConfigError(
            f"{where}.transports[0].class: Debezium sends to Kafka only; "
            f"{type(transport).__name__} is not a KafkaTransport"
        )
    if type(transport).topic_for is not KafkaTransport.topic_for:
        # An override may route by event; Debezium cannot. Accepted when it returns the
        # configured topic for every event the box declares (and for an undeclared one).
        for event_name in [*box.event_types, "(any other event)"]:
            probe = ItemRecord(0, UUID(int=0), box.name, event_name, "key", 0, {}, 0, _EPOCH)
            routed = transport.topic_for(probe)
            if routed != transport.topic:
                raise ConfigError(
                    f"{where}.transports[0].class: {type(transport).__name__}.topic_for sends "
                    f"{event_name} to {routed!r}, not the configured topic "
                    f"{transport.topic!r}; Debezium sends every item of a box to one topic"
                )
    if bound.event_name is not None:
        raise ConfigError(
            f"{where}.transports[0].event_name: a box relayed by Debezium sends every event"
        )
    if transport.key_from != "event_key":
        raise ConfigError(f"{where}.transports[0].args.key_from: Debezium keys by event_key")
    return transport.topic
