"""Kafka administration for the scenarios: each scenario gets fresh topics of 6 partitions
(with the scenario's topic configuration), so no run reads another's messages."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic


def create_topics(bootstrap: str, topics: list[str], config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, num_partitions=6, config=config) for t in topics])
    for future in futures.values():
        future.result(30)
