"""A replicated model for the tests (its table is created by a fixture, not by migrations)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import BigInteger, Identity, Integer, MetaData, String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.creation.shards import ShardRegistry
from outbox_engine.sharding.guard import install_write_guard
from outbox_engine.sharding.replication import replicated

from .support import OutboxItem, reset_transports

shards = ShardRegistry()
ACCOUNT = shards.scope("account", 1, shard_attributes=("account_id",))
THING_UPDATE = shards.category("thing_update", 1, ACCOUNT, coalesce=True)
THING_AUDIT = shards.category("thing_audit", 2, ACCOUNT)


class TestBase(DeclarativeBase):
    metadata = MetaData()


@replicated(THING_UPDATE, OutboxItem)
class Thing(TestBase):
    __tablename__ = "replicated_things"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    account_id: Mapped[int] = mapped_column(Integer, nullable=False)
    name: Mapped[str] = mapped_column(String(100), nullable=False)


@pytest.fixture
async def things(container: Container) -> AsyncIterator[None]:
    """The replicated table, created for one test, with the write guard on."""
    container.outbox()  # installs replication
    async with container.engine().begin() as conn:
        await conn.run_sync(Thing.__table__.create, checkfirst=True)  # type: ignore[attr-defined]
    reset_transports()
    uninstall = install_write_guard(container.engine().sync_engine)  # as the autouse fixture does
    yield
    uninstall()
    async with container.engine().begin() as conn:
        await conn.run_sync(Thing.__table__.drop)  # type: ignore[attr-defined]
        await conn.exec_driver_sql("TRUNCATE outbox_backfills")
