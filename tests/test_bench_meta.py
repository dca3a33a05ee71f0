"""The report's load note: how active the CPU was in the window before each timed run
started, how many runs started quiet (below 10% active over 2 s), and, in bold, when some did
not: other work shared the cores and their absolute numbers are noisy. An unknown share (no
/proc/stat) is said as unknown, never as quiet. And the quiet test itself, on this machine."""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))
from bench import meta


def _outcome(*starts: tuple[bool, float]) -> SimpleNamespace:
    runs = [
        {"settle": {"load1": 1.3, "quiet": quiet, "cpu_active_pct": active}}
        for quiet, active in starts
    ]
    return SimpleNamespace(results={"drain": runs[:1], "steady": runs[1:]})


def test_all_quiet_adds_nothing() -> None:
    note = meta.load_note(_outcome((True, 2.0), (True, 3.0), (True, 9.5)))
    assert note == (
        "The CPU (every core, I/O wait counted) in the 2 s before the timed runs started: "
        "median 3.0%, max 9.5%; 3 of 3 runs started quiet (below 10% active)."
    )


@pytest.mark.parametrize(("active", "said"), [(25.0, "25% active"), (80.0, "80% active")])
def test_a_run_that_started_busy_is_a_warning(active: float, said: str) -> None:
    note = meta.load_note(_outcome((True, 2.0), (False, active), (False, active)))
    assert "1 of 3 runs started quiet" in note
    assert (
        f"**Not every run could start on a quiet machine: the 2 others started after the "
        f"bounded wait with the CPU {said} (median)" in note
    )
    assert note.endswith("how active the CPU was when each run started.**")


def test_an_unknown_share_is_not_quiet() -> None:
    note = meta.load_note(_outcome((False, math.nan), (False, math.nan)))
    assert "not known (no /proc/stat); 0 of 2 runs started quiet" in note
    assert "with the CPU of unknown activity" in note


def test_no_run_at_all() -> None:
    assert meta.load_note(SimpleNamespace(results={})) == "No timed run completed."


def test_the_quiet_test_waits_for_the_cpu_not_the_load_average() -> None:
    from bench import machine

    # This machine between tests: quiet within the bound (a window or a few).
    started = time.monotonic()
    quiet, active, waited = machine.wait_for_quiet(50.0, 0.5, 10.0)
    assert quiet
    assert 0.0 <= active < 50.0
    assert waited < 10.0
    assert time.monotonic() - started >= 0.5  # at least one window was measured
    # A threshold no machine is under: it measures until the bound, then runs anyway.
    started = time.monotonic()
    quiet, active, waited = machine.wait_for_quiet(0.0, 0.5, 1.2)
    assert not quiet
    assert active >= 0.0
    assert 1.2 <= waited < 3.0
    assert time.monotonic() - started >= 1.2
    # A wait of 0 still measures one window and records it.
    quiet, active, waited = machine.wait_for_quiet(0.0, 0.3, 0.0)
    assert not quiet
    assert not math.isnan(active)
    assert 0.3 <= waited < 1.0


def test_a_busy_cpu_is_not_quiet() -> None:
    from bench import machine

    stop = time.monotonic() + 1.5
    spins = 0

    def spin() -> None:
        nonlocal spins
        while time.monotonic() < stop:
            spins += 1

    worker = threading.Thread(target=spin)
    worker.start()
    try:
        # One core spinning is half of two cores, a quarter of four: never below 10%.
        quiet, active, _ = machine.wait_for_quiet(10.0, 0.5, 0.0)
    finally:
        worker.join()
    assert not quiet
    assert active >= 100.0 / (os.cpu_count() or 1) * 0.8
    assert spins > 0


CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 2
model name\t: AMD EPYC
stepping\t: 1
cpu MHz\t\t: 2596.098
cache size\t: 1024 KB

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
"""


def test_the_cpu_line_names_family_model_clock_and_cache() -> None:
    from bench import machine

    assert machine.cpu_identity(CPUINFO) == (
        "family 26, model 2, stepping 1; 2,596 MHz; cache 1024 KB"
    )
    assert machine.cpu_identity("model name\t: Some CPU\n") == ""
    assert machine.cpu_identity("") == ""


def test_steal_is_the_share_of_all_cpu_time_between_two_readings() -> None:
    from bench import machine

    # user nice system idle iowait irq softirq steal
    before = [100, 0, 50, 800, 10, 0, 5, 35]
    after = [300, 0, 150, 1600, 20, 0, 15, 115]  # 1,200 jiffies more, 80 of them stolen
    assert machine.steal_pct(before, after) == pytest.approx(100 * 80 / 1200)
    assert machine.steal_pct(before, before) != machine.steal_pct(before, before)  # nan
    assert machine.steal_pct(None, after) != machine.steal_pct(None, after)
    assert "6.67% of all CPU time" in meta.steal_line(100 * 80 / 1200)
    assert "not known" in meta.steal_line(float("nan"))


def _hosted(*shares: float | None) -> SimpleNamespace:
    runs = [
        {"settle": {"host_during": None if s is None else {"slow_share": s, "fast_us": 287.4}}}
        for s in shares
    ]
    return SimpleNamespace(results={"drain": runs[:2], "steady": runs[2:]})


def test_the_host_line_gives_the_median_slow_share_that_compare_reads_back() -> None:
    from bench import compare

    line = meta.host_line(_hosted(0.02, 0.35, None, 0.89, 0.40))
    assert line.startswith(compare.HOST_LINE + ": median 38% of their time (2%-89%, 4 runs")
    assert "a fast unit 287 µs" in line
    assert compare.host_share([line]) == 0.38
    unmeasured = meta.host_line(_hosted(None, None))
    assert unmeasured == compare.HOST_LINE + ": not measured"
    assert compare.host_share([unmeasured]) is None
