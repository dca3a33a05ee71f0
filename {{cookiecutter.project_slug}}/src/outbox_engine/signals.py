"""Run a process's main coroutine until SIGTERM or SIGINT asks it to stop.

The worker and the consumer (relay/app.py, inbox/app.py) stop the same way: the signal
calls their `stop()`, which lets the running batch finish (within the shutdown deadline)
instead of cancelling it, so a deployment's SIGTERM never leaves a half-recorded batch.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Coroutine
from typing import Any


async def run_until_signal(
    start: Callable[[], Coroutine[Any, Any, None]], stop: Callable[[], None]
) -> None:
    """Await `start()`; SIGTERM and SIGINT call `stop()` (which should make it return)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    await start()
