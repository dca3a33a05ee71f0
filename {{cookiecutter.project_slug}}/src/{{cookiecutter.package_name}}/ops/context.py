"""The CLI's per-invocation state: the container, built (settings read, logging configured)
only by the commands that need the service's settings, and where its services are, for the
one-line error when one cannot be reached."""

from __future__ import annotations

import asyncio
import getpass
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import typer

from outbox_engine.operations.selection import check_text

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from ..container import Container

T = TypeVar("T")


def plain(value: object) -> str:
    """A setting's text, whether it is a `str` or a pydantic `SecretStr`."""
    reveal = getattr(value, "get_secret_value", None)
    return str(reveal() if callable(reveal) else value)


class CliState:
    def __init__(self) -> None:
        self._container: Container | None = None
        self.database_url: str | None = None
        self.kafka_servers: str | None = None

    def container(self) -> Container:
        """The service's container; reads and checks the settings (SettingsError if bad)."""
        if self._container is None:
            from ..container import Container
            from ..logging_setup import configure_logging

            container = Container()
            settings = container.settings()
            self.database_url = plain(settings.database_url)
            self.kafka_servers = plain(settings.kafka_bootstrap_servers)
            configure_logging(settings.log_level, settings.log_format)
            self._container = container
        return self._container

    def run(self, work: Callable[[AsyncEngine], Awaitable[T]]) -> T:
        """Run `work` on the container's engine in a fresh event loop, then close the pool."""
        container = self.container()

        async def main() -> T:
            try:
                return await work(container.engine())
            finally:
                await container.engine().dispose()

        return asyncio.run(main())


def state(ctx: typer.Context) -> CliState:
    found = ctx.find_object(CliState)
    return found if found is not None else ctx.ensure_object(CliState)


def cli_actor(given: str | None) -> str:
    """Who the audit log names: `cli:<--actor>` or `cli:<OS user>`."""
    if given is not None:
        return f"cli:{check_text('--actor', given.strip())}"
    try:
        return f"cli:{getpass.getuser()}"
    except (OSError, KeyError):  # no login name and no passwd entry (some containers)
        return f"cli:uid-{os.getuid()}"
