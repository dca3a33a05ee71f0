"""Alembic environment: async engine, metadata of every model of the service."""

from __future__ import annotations

import asyncio
import os

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from {{ cookiecutter.package_name }} import items
from {{ cookiecutter.package_name }}.db import Base
{% if cookiecutter.include_example_domain -%}
from {{ cookiecutter.package_name }}.domain import models as domain_models
{% endif -%}
from {{ cookiecutter.package_name }}.messaging import audit, pauses

# Importing the model modules registers their tables on Base.metadata (the engine's own
# tables too: the pauses and the operator audit log).
MODEL_MODULES = {% if cookiecutter.include_example_domain %}(items, domain_models, audit, pauses){% else %}(items, audit, pauses){% endif %}

config = context.config
target_metadata = Base.metadata


def database_url() -> str:
    url = config.get_main_option("sqlalchemy.url") or os.environ.get("DATABASE_URL")
    if not url:
        raise RuntimeError("DATABASE_URL is not set")
    return url


def run_offline() -> None:
    context.configure(url=database_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()


async def run_online() -> None:
    engine = create_async_engine(database_url())
    async with engine.connect() as connection:
        await connection.run_sync(_run)
    await engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    asyncio.run(run_online())
