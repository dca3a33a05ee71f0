"""The event loop of worker and consumer (outbox_engine/event_loop.py): "auto" is uvloop where
it imports, "asyncio" is asyncio's own, "uvloop" without uvloop is a ConfigError that names
the setting, and `run` logs its choice once and closes the loop as `asyncio.run` does."""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
from typing import Any

import pytest

from outbox_engine.config.boxes import ConfigError
from outbox_engine.event_loop import EVENT_LOOPS, loop_factory, run

pytest.importorskip("uvloop", reason="uvloop is not built for this platform")


def _loop_module(choice: str) -> str:
    """The top module of the loop class `run(..., choice)` ran its coroutine on."""
    seen: list[str] = []

    async def main() -> None:
        seen.append(type(asyncio.get_running_loop()).__module__.split(".")[0])

    run(main(), choice)
    return seen[0]


def _no_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry makes `import uvloop` raise ImportError, as on a platform without it.
    monkeypatch.setitem(sys.modules, "uvloop", None)


def test_the_choices() -> None:
    assert EVENT_LOOPS == ("auto", "uvloop", "asyncio")


@pytest.mark.parametrize(("choice", "module"), [("auto", "uvloop"), ("uvloop", "uvloop")])
def test_auto_and_uvloop_run_on_uvloop(choice: str, module: str) -> None:
    assert _loop_module(choice) == module


def test_asyncio_runs_on_asyncios_own_loop() -> None:
    assert loop_factory("asyncio") == (asyncio.new_event_loop, "asyncio (EVENT_LOOP=asyncio)")
    assert _loop_module("asyncio") == "asyncio"


def test_auto_falls_back_to_asyncio_without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_uvloop(monkeypatch)
    assert loop_factory("auto") == (asyncio.new_event_loop, "asyncio (uvloop is not installed)")
    assert _loop_module("auto") == "asyncio"


def test_uvloop_chosen_without_uvloop_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_uvloop(monkeypatch)
    coroutine = asyncio.sleep(0)
    with pytest.raises(ConfigError, match=r"^EVENT_LOOP=uvloop, but uvloop cannot be imported"):
        run(coroutine, "uvloop")
    # Closed, not left for the garbage collector to warn about ("never awaited").
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED


def test_an_unknown_choice_names_the_setting_and_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"^EVENT_LOOP must be one of auto, uvloop, asyncio"):
        loop_factory("trio")


def test_run_logs_its_choice_once_and_closes_the_loop(caplog: pytest.LogCaptureFixture) -> None:
    loops: list[Any] = []

    async def main() -> None:
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0)

    with caplog.at_level(logging.INFO, logger="outbox_engine.event_loop"):
        run(main(), "auto")
    said = [r.getMessage() for r in caplog.records if r.name == "outbox_engine.event_loop"]
    assert [line.startswith("event loop: uvloop ") for line in said] == [True], said
    assert len(loops) == 1
    assert loops[0].is_closed()
