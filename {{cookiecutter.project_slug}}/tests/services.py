"""Where the tests find PostgreSQL and Kafka.

1. TEST_DATABASE_URL / TEST_KAFKA_BOOTSTRAP_SERVERS when set (any reachable servers; the
   database user must be allowed to create databases);
2. else testcontainers, when a Docker engine answers;
3. else stop with a message that says how to provide them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

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
        client.ping()
        return True
    except Exception:
        return False


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
    from testcontainers.kafka import KafkaContainer
    from testcontainers.postgres import PostgresContainer

    with ExitStack() as stack:
        postgres = stack.enter_context(PostgresContainer("postgres:16-alpine", driver="asyncpg"))
        kafka_container = stack.enter_context(KafkaContainer("apache/kafka:4.1.0").with_kraft())
        yield Services(
            postgres.get_connection_url(), kafka_container.get_bootstrap_server(), "testcontainers"
        )
