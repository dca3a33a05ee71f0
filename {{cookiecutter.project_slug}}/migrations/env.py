"""Alembic environment: async engine, metadata of every model of the service.

`alembic revision --autogenerate` compares the database with `Base.metadata` and the engine's
`ENGINE_METADATA`, so every table must be registered before it runs: the item tables
(items.py), the engine's own tables (outbox_engine.store), and every module named `models` anywhere in the package (yours too: put your tables in e.g.
`src/{{ cookiecutter.package_name }}/shipping/models.py`, subclassing `db.Base`). The engine's
tables that no model declares are left out of the comparison (UNMODELLED_TABLES), so that
autogenerate never proposes to drop them.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import pkgutil
from types import ModuleType
from typing import Any

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

import {{ cookiecutter.package_name }}
from {{ cookiecutter.package_name }} import items
from {{ cookiecutter.package_name }}.db import Base
{% if cookiecutter.include_example_domain -%}
from {{ cookiecutter.package_name }}.domain import models as domain_models
{% endif -%}
from outbox_engine.store import audit, capture, pauses
from outbox_engine.store.metadata import ENGINE_METADATA

# Importing the model modules registers their tables on Base.metadata; the engine's own
# tables (the pauses, the operator audit log, the Debezium capture tables) are on ENGINE_METADATA.
MODEL_MODULES = {% if cookiecutter.include_example_domain %}(items, domain_models, audit, capture, pauses){% else %}(items, audit, capture, pauses){% endif %}

# Created by the migrations, read and written with SQL by the engine (outbox_engine/store/backfill.py).
UNMODELLED_TABLES = frozenset({"outbox_backfills"})


def model_modules() -> list[ModuleType]:
    """Every `models` module of the package (imported, so their tables are registered)."""
    package = {{ cookiecutter.package_name }}
    found = []
    for module in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
        if module.name.rsplit(".", 1)[-1] == "models":
            found.append(importlib.import_module(module.name))
    return found


DISCOVERED_MODEL_MODULES = model_modules()


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Leave the engine's unmodelled tables (and their indexes) out of autogenerate."""
    table = name if type_ == "table" else getattr(getattr(obj, "table", None), "name", None)
    return not (reflected and compare_to is None and table in UNMODELLED_TABLES)


config = context.config
target_metadata = [Base.metadata, ENGINE_METADATA]


def database_url() -> str:
    url = config.get_main_option("sqlalchemy.url") or os.environ.get("DATABASE_URL")
    if not url:
        raise RuntimeError("DATABASE_URL is not set")
    return url


def run_offline() -> None:
    context.configure(
        url=database_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        include_object=include_object,
    )
    with context.begin_transaction():
        context.run_migrations()


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection, target_metadata=target_metadata, include_object=include_object
    )
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
