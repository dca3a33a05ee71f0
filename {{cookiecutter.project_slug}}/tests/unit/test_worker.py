"""The worker's start-up checks."""

from __future__ import annotations

from outbox_engine.relay.readiness import checked_topic, kafka_timeout_warnings, kafka_transports
from outbox_engine.transports.builtin import KafkaTransport
from outbox_engine.transports.kafka import DEFAULT_PRODUCER_CONFIG

from ..support import INBOX_BOX, OUTBOX_BOX, RecordingTransport, make_registry, transport


def test_a_box_whose_transport_timeout_is_not_above_the_producer_timeout_is_warned_about() -> None:
    defaults = make_registry().get(OUTBOX_BOX)
    assert kafka_timeout_warnings([defaults], DEFAULT_PRODUCER_CONFIG) == []
    short = make_registry(outbox={"transport_timeout_seconds": 25}).get(OUTBOX_BOX)
    warnings = kafka_timeout_warnings([short], DEFAULT_PRODUCER_CONFIG)
    assert len(warnings) == 1
    assert OUTBOX_BOX in warnings[0]
    assert "message.timeout.ms 25000" in warnings[0]
    # The producer's timeout raised through the environment is compared too.
    raised = {**DEFAULT_PRODUCER_CONFIG, "message.timeout.ms": "45000"}
    assert len(kafka_timeout_warnings([defaults], raised)) == 1
    # Inbox boxes do not produce to Kafka.
    assert kafka_timeout_warnings([make_registry().get(INBOX_BOX)], raised) == []


def test_keys_are_hashed_as_kafkas_java_producer_does() -> None:
    """The Debezium relay's producer is Kafka's Java client (murmur2): with librdkafka's
    default (CRC32) a key would change partition when a box switches relays."""
    assert DEFAULT_PRODUCER_CONFIG["partitioner"] == "murmur2_random"


def test_only_the_boxes_that_relay_to_kafka_are_woken_when_kafka_is_back() -> None:
    """The lanes of a box without a Kafka transport keep their own back-off when the Kafka
    check passes again (relay/worker.py hands them no `recovered` pulse)."""
    mixed = make_registry(
        outbox={
            "transports": [
                transport(RecordingTransport, name="side"),
                transport(KafkaTransport, topic="orders-a"),
                transport(KafkaTransport, topic="orders-b"),
            ]
        }
    )
    found = kafka_transports(mixed.get(OUTBOX_BOX))
    assert [t.topic for t in found] == ["orders-a", "orders-b"]
    assert checked_topic([mixed.get(INBOX_BOX), mixed.get(OUTBOX_BOX)]) == "orders-a"
    elsewhere = make_registry(outbox={"transports": [transport(RecordingTransport, name="x")]})
    assert kafka_transports(elsewhere.get(OUTBOX_BOX)) == []
    assert checked_topic([elsewhere.get(OUTBOX_BOX)]) is None
    assert kafka_transports(elsewhere.get(INBOX_BOX)) == []
