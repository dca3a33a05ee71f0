"""Where the tests find PostgreSQL and Kafka.

1. TEST_DATABASE_URL / TEST_KAFKA_BOOTSTRAP_SERVERS when set (any reachable servers; the
   database user must be allowed to create databases);
2. else testcontainers, when a Docker engine answers: PostgreSQL, and Kafka as a single KRaft
   node (broker and controller, no ZooKeeper);
3. else stop with a message that says how to provide them.

The Kafka container is the one testcontainers' Kafka module supports in KRaft mode: a
Confluent Platform image (`confluentinc/cp-kafka`, tag >= 7.0.0; its start script runs the
image's `/etc/confluent/docker/*` scripts, which the Apache image does not have), pinned to the
tag the module's own KRaft test starts. The containers are built by `kafka_container()` and
`postgres_container()` so that their set-up (image, environment, start script) can be checked
without a Docker engine (tests/unit/test_services.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from testcontainers.community.kafka import KafkaContainer
    from testcontainers.community.postgres import PostgresContainer

# The Confluent Platform tag testcontainers' Kafka module starts in its own KRaft test
# (its default image); `with_kraft()` refuses tags below 7.0.0.
KAFKA_IMAGE = "confluentinc/cp-kafka:7.6.0"
POSTGRES_IMAGE = "postgres:16-alpine"

HOW_TO = (
    "These tests need real PostgreSQL and Kafka. Either export\n"
    "  TEST_DATABASE_URL=postgresql+asyncpg://user:pass@host:5432/postgres\n"
    "  TEST_KAFKA_BOOTSTRAP_SERVERS=host:9092\n"
    "or run them where a Docker engine is available (testcontainers starts both)."
)


class ServicesUnavailable(RuntimeError):
    pass


@dataclass(frozen=True)
class Services:
    database_url: str
    kafka_bootstrap_servers: str
    source: str


def _docker_available() -> bool:
    try:
        import docker  # type: ignore[import-untyped]

        client = docker.from_env()
        try:
            client.ping()
        finally:
            client.close()
        return True
    except Exception:
        return False


def kafka_container(docker_client_kw: dict[str, Any] | None = None) -> KafkaContainer:
    """A single-node KRaft Kafka, not started. `docker_client_kw` goes to the Docker client
    (the set-up test passes a fixed API version so that no engine is contacted)."""
    from testcontainers.community.kafka import KafkaContainer

    container = KafkaContainer(KAFKA_IMAGE, docker_client_kw=docker_client_kw).with_kraft()
    # The tests use a topic of their own each, created on first use.
    container.with_env("KAFKA_AUTO_CREATE_TOPICS_ENABLE", "true")
    container.with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
    container.with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1")
    return container


def postgres_container(docker_client_kw: dict[str, Any] | None = None) -> PostgresContainer:
    """PostgreSQL whose user (a superuser) may create the per-run databases; not started."""
    from testcontainers.community.postgres import PostgresContainer

    return PostgresContainer(POSTGRES_IMAGE, driver="asyncpg", docker_client_kw=docker_client_kw)


@contextmanager
def provide_services() -> Iterator[Services]:
    db = os.environ.get("TEST_DATABASE_URL")
    kafka = os.environ.get("TEST_KAFKA_BOOTSTRAP_SERVERS")
    if db and kafka:
        if not db.startswith("postgresql+asyncpg://"):
            raise ServicesUnavailable(
                "TEST_DATABASE_URL must start with postgresql+asyncpg://\n" + HOW_TO
            )
        yield Services(db, kafka, "environment")
        return
    if db or kafka:
        missing = "TEST_KAFKA_BOOTSTRAP_SERVERS" if db else "TEST_DATABASE_URL"
        raise ServicesUnavailable(f"{missing} is not set.\n" + HOW_TO)
    if not _docker_available():
        raise ServicesUnavailable("No TEST_* variables and no Docker engine.\n" + HOW_TO)
    with ExitStack() as stack:
        postgres = stack.enter_context(postgres_container())
        kafka_node = stack.enter_context(kafka_container())
        yield Services(
            postgres.get_connection_url(), kafka_node.get_bootstrap_server(), "testcontainers"
        )
