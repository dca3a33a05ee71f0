"""The report's load note says why runs did not start quiet, from what the CPU did in the
second before each start: a 1-minute load of 1.0 or more with an idle CPU is the previous
run's average decaying (the ratios stand), a busy CPU is other work sharing the cores (the
numbers are noisy, said in bold). An unknown busy share counts as busy."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))
from bench import meta


def _outcome(*starts: tuple[bool, float]) -> SimpleNamespace:
    runs = [
        {"settle": {"load1": 0.5 if quiet else 1.3, "quiet": quiet, "cpu_busy_pct": busy}}
        for quiet, busy in starts
    ]
    return SimpleNamespace(results={"drain": runs[:1], "steady": runs[1:]})


def test_all_quiet_adds_nothing() -> None:
    note = meta.load_note(_outcome((True, 2.0), (True, 3.0)))
    assert note.endswith("2 of 2 runs started quiet (load < 1.0).")


def test_a_decaying_average_is_named_as_such() -> None:
    note = meta.load_note(_outcome((True, 2.0), (False, 3.0), (False, 20.0), (False, 4.0)))
    assert "1 of 4 runs started quiet" in note
    assert "The 3 others started while the average still carried the run before them" in note
    assert "the CPU was 4% busy (median)" in note
    assert "**" not in note


@pytest.mark.parametrize("busy", [25.0, 80.0, float("nan")])
def test_a_busy_cpu_is_a_warning(busy: float) -> None:
    note = meta.load_note(_outcome((True, 2.0), (False, busy)))
    assert "**Not every run could start on a quiet machine" in note
    assert "other jobs shared its cores" in note


def test_no_run_at_all() -> None:
    assert meta.load_note(SimpleNamespace(results={})) == "No timed run completed."
