"""Names every PostgreSQL connection of this process GUARANTEES_APPLICATION_NAME.

Python imports `sitecustomize` at start-up from the path, so a service process started with
this directory on PYTHONPATH opens its asyncpg connections (SQLAlchemy's pool included) with
that `application_name`, unless the caller sets one itself: the worker's lock connection
keeps its own name. The connection-termination scenarios read the names in
`pg_stat_activity` to pick one process's connections; a client port would not do, because a
container's port forwarding hides it from the server.
"""

from __future__ import annotations

import functools
import os
from typing import Any

NAME = os.environ.get("GUARANTEES_APPLICATION_NAME", "")

if NAME:
    import asyncpg  # type: ignore[import-untyped]

    _connect = asyncpg.connect

    @functools.wraps(_connect)
    async def _named_connect(*args: Any, **kwargs: Any) -> Any:
        settings = dict(kwargs.get("server_settings") or {})
        settings.setdefault("application_name", NAME)
        kwargs["server_settings"] = settings
        return await _connect(*args, **kwargs)

    setattr(asyncpg, "connect", _named_connect)  # noqa: B010
