"""Transports of the {{ cookiecutter.outbox_item }} outbox box (user-editable)."""

from __future__ import annotations

from outbox_engine import ItemRecord, KafkaTransport


class {{ cookiecutter.outbox_item.title().replace('_', '') }}EventsKafkaTransport(KafkaTransport):
    """Relays {{ cookiecutter.outbox_item }} events to Kafka: key = event key, value = payload.

    Override `topic_for` to route by event, or subclass `Transport` for another destination.
    """

    def topic_for(self, item: ItemRecord) -> str:
        return self.topic
