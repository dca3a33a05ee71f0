"""The event loop of a long-running process: uvloop where it is installed.

Contract: `run(main, choice)` runs the coroutine `main` on a new event loop until it returns,
then closes the loop, as `asyncio.run` does, and logs once which loop it chose. `choice` is
one of `EVENT_LOOPS`: "auto" (uvloop when it can be imported, else asyncio's own loop),
"uvloop" (a `ConfigError` naming the setting when it cannot be imported) or "asyncio". The
worker and the consumer run on it (their CLI commands pass the `EVENT_LOOP` setting); the
api runs under uvicorn, whose own "auto" makes the same choice. Tests and the in-process
helpers run on whatever loop their caller has.

Why: at a few hundred items a second every item is its own batch, and a batch is a chain of
round trips (the NOTIFY, the claim, the delivery report from librdkafka's thread, the
record), each a turn of the event loop. uvloop turns it in C. Measured on a 2-core AMD EPYC
(a worker relaying 200 one-item transactions a second, the worker's CPU from /proc, runs
alternating): 1,045-1,100 us of CPU an item on asyncio's loop, 903-985 on uvloop; 175
against 162 us at 2,000 items a second; a 100k drain the same within the machine's spread
(docs/performance.md). uvloop is not built for Windows; there "auto" falls back.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Callable, Coroutine
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Literal, get_args

from outbox_engine.config.boxes import ConfigError

log = logging.getLogger(__name__)

EventLoopChoice = Literal["auto", "uvloop", "asyncio"]
EVENT_LOOPS: tuple[str, ...] = get_args(EventLoopChoice)

LoopFactory = Callable[[], asyncio.AbstractEventLoop]
SETTING = "EVENT_LOOP"


def loop_factory(choice: str) -> tuple[LoopFactory, str]:
    """The factory of the loop `choice` gives and a description of the choice for the log.
    ConfigError, naming the setting (`SETTING`), for an unknown choice or for "uvloop" when
    uvloop cannot be imported."""
    if choice not in EVENT_LOOPS:
        raise ConfigError(f"{SETTING} must be one of {', '.join(EVENT_LOOPS)}, not {choice!r}")
    if choice == "asyncio":
        return asyncio.new_event_loop, f"asyncio ({SETTING}=asyncio)"
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError as exc:
        if choice == "uvloop":
            raise ConfigError(
                f"{SETTING}=uvloop, but uvloop cannot be imported ({exc}): install it, or set "
                f"{SETTING} to auto or asyncio"
            ) from None
        return asyncio.new_event_loop, "asyncio (uvloop is not installed)"
    factory: LoopFactory = uvloop.new_event_loop
    return factory, f"uvloop {_version('uvloop')}"


def run(main: Coroutine[Any, Any, None], choice: str = "auto") -> None:
    """Run `main` to completion on a new loop of `choice` (see the module's contract)."""
    try:
        factory, described = loop_factory(choice)
    except ConfigError:
        main.close()  # never awaited: close it, or Python warns at exit
        raise
    log.info("event loop: %s", described)
    # Always through a factory: the Runner then leaves the thread's current loop alone
    # (without one it sets its own and unsets it after).
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main)


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "(version unknown)"
