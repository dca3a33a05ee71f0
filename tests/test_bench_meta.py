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
