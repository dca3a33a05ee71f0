"""Shared fixtures: a freshly migrated database per run, a container wired to it, clean
tables for every test, and a unique Kafka topic per test."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy import text

from {{ cookiecutter.package_name }}.container import Container, shutdown
from {{ cookiecutter.package_name }}.settings import Settings
from outbox_engine.sharding.guard import install_write_guard

from .services import Services, ServicesUnavailable, provide_services
from .support import ITEM_TABLES, migrate

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("guarantees", "the guarantees suite (tests/guarantees)")
    group.addoption(
        "--soak-seconds",
        type=float,
        default=float(os.environ.get("GUARANTEES_SOAK_SECONDS") or 0),
        help="repeat each guarantees scenario for its share of this many seconds and print "
        "the summed table (env GUARANTEES_SOAK_SECONDS; default 0: each runs once)",
    )
    group.addoption(
        "--guarantees-fast",
        action="store_true",
        default=os.environ.get("GUARANTEES_FAST") == "1",
        help="shorten the Kafka outage from 30 s to 10 s (env GUARANTEES_FAST=1)",
    )


@pytest.fixture(scope="session")
def services() -> Iterator[Services]:
    try:
        with provide_services() as provided:
            yield provided
    except ServicesUnavailable as exc:
        pytest.exit(str(exc), returncode=2)


@pytest.fixture(scope="session")
def database_url(services: Services) -> Iterator[str]:
    """A database created for this run, migrated with alembic, dropped at the end."""
    admin = services.database_url.replace("postgresql+asyncpg://", "postgresql://", 1)
    name = f"test_{uuid.uuid4().hex[:12]}"

    async def admin_sql(*statements: str) -> None:
        conn = await asyncpg.connect(admin)
        try:
            for statement in statements:
                await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(admin_sql(f'CREATE DATABASE "{name}"'))
    base, _, _ = services.database_url.rpartition("/")
    url = f"{base}/{name}"
    migrate(url)
    yield url
    asyncio.run(
        admin_sql(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'",
            f'DROP DATABASE IF EXISTS "{name}"',
        )
    )


@pytest.fixture(scope="session")
def settings(database_url: str, services: Services) -> Settings:
    return Settings(
        database_url=database_url,
        kafka_bootstrap_servers=services.kafka_bootstrap_servers,
        boxes_file=PROJECT_ROOT / "config" / "boxes.yaml",
        log_format="text",
{%- if cookiecutter.opentelemetry %}
        otel_sdk_disabled=False,
{%- endif %}
    )


@pytest.fixture(scope="session")
async def container(settings: Settings) -> AsyncIterator[Container]:
    container = Container()
    container.settings.override(settings)
    container.producer().start()
    yield container
    await shutdown(container)


@pytest.fixture(autouse=True)
async def clean_tables(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """Every test that touches the database starts from empty tables."""
    yield
    if "container" not in request.fixturenames:
        return
    container: Container = request.getfixturevalue("container")
    async with container.engine().begin() as conn:
        await conn.execute(text(f"TRUNCATE {', '.join(ITEM_TABLES)} RESTART IDENTITY CASCADE"))


@pytest.fixture(autouse=True)
def write_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    """On for every test that uses the database: a bulk UPDATE/DELETE of a replicated model's
    table fails with the statement and how to fix it (see outbox_engine/sharding/guard.py)."""
    if "container" not in request.fixturenames:
        yield
        return
    container: Container = request.getfixturevalue("container")
    uninstall = install_write_guard(container.engine().sync_engine)
    try:
        yield
    finally:
        uninstall()


@pytest.fixture
def topic() -> str:
    """A Kafka topic of this test alone (auto-created on first use)."""
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def env_topics(topic: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point the configured boxes at this test's topic."""
    monkeypatch.setenv("{{ cookiecutter.outbox_item.upper() }}_EVENTS_TOPIC", topic)
    monkeypatch.setenv("{{ cookiecutter.inbox_item.upper() }}_EVENTS_TOPIC", f"{topic}-in")
    return topic


def pytest_report_header() -> str:
    source = (
        "environment"
        if os.environ.get("TEST_DATABASE_URL")
        else "testcontainers (if Docker answers)"
    )
    return f"services from: {source}"
