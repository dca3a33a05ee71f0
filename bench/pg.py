"""PostgreSQL side of the harness: its own databases (bench_*), copies of filled templates,
and what the runs read back."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg


class Postgres:
    def __init__(self, admin_url: str) -> None:
        # admin_url: the services' database (postgresql+asyncpg://.../outbox)
        self.admin_dsn = admin_url.replace("postgresql+asyncpg://", "postgresql://", 1)

    def url(self, database: str, driver: str = "postgresql+asyncpg") -> str:
        parts = urlsplit(self.admin_dsn)
        return urlunsplit((driver, parts.netloc, f"/{database}", parts.query, ""))

    async def _admin(self, *statements: str) -> None:
        conn = await asyncpg.connect(self.admin_dsn)
        try:
            for statement in statements:
                await conn.execute(statement)
        finally:
            await conn.close()

    def recreate(self, database: str, template: str | None = None, file_copy: bool = False) -> None:
        """Drop `database` (closing its sessions) and create it, empty or as a copy of
        `template` (a block-level copy written to the WAL: a filled backlog in a second or
        two). `file_copy`: PostgreSQL's FILE_COPY strategy instead (a checkpoint, then the
        files copied without WAL), for templates of gigabytes (bench/growth.py). A timed
        run settles the copy first (bench/settle.py: VACUUM (ANALYZE), CHECKPOINT)."""
        suffix = f" TEMPLATE {template}" if template else ""
        if template and file_copy:
            suffix += " STRATEGY FILE_COPY"
        asyncio.run(
            self._admin(
                f"DROP DATABASE IF EXISTS {database} WITH (FORCE)",
                f"CREATE DATABASE {database}{suffix}",
            )
        )

    def exists(self, database: str) -> bool:
        async def query() -> bool:
            conn = await asyncpg.connect(self.admin_dsn)
            try:
                found = await conn.fetchval(
                    "SELECT 1 FROM pg_database WHERE datname = $1", database
                )
                return found is not None
            finally:
                await conn.close()

        return asyncio.run(query())

    def drop(self, *databases: str) -> None:
        asyncio.run(self._admin(*(f"DROP DATABASE IF EXISTS {d} WITH (FORCE)" for d in databases)))

    async def execute(self, database: str, statement: str) -> None:
        conn = await asyncpg.connect(self.url(database, "postgresql"))
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    async def _fetchrow(self, database: str, query: str, *args: Any) -> Any:
        conn = await asyncpg.connect(self.url(database, "postgresql"))
        try:
            return await conn.fetchrow(query, *args)
        finally:
            await conn.close()

    async def _fetch(
        self, database: str, query: str, *args: Any, before: tuple[str, ...] = ()
    ) -> list[Any]:
        conn = await asyncpg.connect(self.url(database, "postgresql"))
        try:
            for statement in before:
                await conn.execute(statement)
            return list(await conn.fetch(query, *args))
        finally:
            await conn.close()

    async def settle(self, database: str) -> tuple[int, int, bool]:
        """`VACUUM (ANALYZE)` the database, then `CHECKPOINT`, with PostgreSQL's own evidence:
        (user tables, tables with a manual vacuum and analyze on record, whether the control
        file's checkpoint location moved)."""
        conn = await asyncpg.connect(self.url(database, "postgresql"))
        try:
            before = await conn.fetchval("SELECT checkpoint_lsn FROM pg_control_checkpoint()")
            since = await conn.fetchval("SELECT clock_timestamp()")
            await conn.execute("VACUUM (ANALYZE)")
            await conn.execute("CHECKPOINT")
            after = await conn.fetchval("SELECT checkpoint_lsn FROM pg_control_checkpoint()")
            tables, settled = await conn.fetchrow(
                "SELECT count(*), count(*) FILTER (WHERE last_vacuum >= $1 "
                "AND last_analyze >= $1) FROM pg_stat_user_tables",
                since,
            )
            return int(tables), int(settled), after != before
        finally:
            await conn.close()

    def fetchrow(self, database: str, query: str, *args: Any) -> Any:
        return asyncio.run(self._fetchrow(database, query, *args))

    def fetch(
        self, database: str, query: str, *args: Any, before: tuple[str, ...] = ()
    ) -> list[Any]:
        """The rows of `query` on a new connection, after the `before` statements on it."""
        return asyncio.run(self._fetch(database, query, *args, before=before))

    def version(self) -> str:
        async def query() -> str:
            conn = await asyncpg.connect(self.admin_dsn)
            try:
                return str(await conn.fetchval("SHOW server_version"))
            finally:
                await conn.close()

        return asyncio.run(query()).split(" ")[0]
