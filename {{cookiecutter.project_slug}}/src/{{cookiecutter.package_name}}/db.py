"""The declarative base and the async engine.
{%- if cookiecutter.opentelemetry %}

Every engine made here is handed to telemetry, which traces its statements (one span per
statement, inside a trace) once telemetry is on.
{%- endif %}"""

from __future__ import annotations

from sqlalchemy import MetaData
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import DeclarativeBase

from outbox_engine import ping_on_checkout
from outbox_engine.store.metadata import NAMING_CONVENTION


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def create_engine(database_url: str, pool_size: int = 10) -> AsyncEngine:
    engine = create_async_engine(
        database_url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_recycle=1800,
    )
    # A pooled connection is checked with one `SELECT 1` when taken (instead of
    # pool_pre_ping's three round trips): a connection the server dropped is replaced
    # before the caller sees it.
    ping_on_checkout(engine)
{%- if cookiecutter.opentelemetry %}
    from .telemetry.clients import trace_statements

    trace_statements(engine)
{%- endif %}
    return engine


def create_session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)
