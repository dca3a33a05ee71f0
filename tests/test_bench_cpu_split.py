"""The drain's split of the machine's CPU per message (bench/cpu_split.py): the arithmetic
on two snapshots, and a snapshot of this machine read from /proc."""

from __future__ import annotations

import os
import sys

import pytest

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))
from bench import cpu_split, machine, procs, report_drain

TICK = 1 / procs.CLOCK_TICKS


def _machine(busy: int, idle: int) -> list[int]:
    """/proc/stat's counters: user, nice, system, idle, iowait, irq, softirq, steal."""
    return [busy, 0, 0, idle, 0, 0, 0, 0]


def test_per_message_splits_the_busy_time_by_process_group() -> None:
    before = {
        "pids": {"10": ("postgres", 1.0), "11": ("postgres", 2.0), "20": ("kafka", 5.0)},
        "harness": 3.0,
        "machine": _machine(1000, 5000),
    }
    # 2 s of busy time over 4 s of wall on two cores (400 ticks busy, 400 idle at 100 Hz):
    # the backend 11 +0.5 s, a backend new in the window (12) 0.25 s, the backend 10 gone
    # (not counted), the broker +0.25 s, the harness +0.1 s; the relay 0.6 s.
    after = {
        "pids": {"11": ("postgres", 2.5), "12": ("postgres", 0.25), "20": ("kafka", 5.25)},
        "harness": 3.1,
        "machine": _machine(1000 + 2 * procs.CLOCK_TICKS, 5000 + 2 * procs.CLOCK_TICKS),
    }
    split = cpu_split.per_message(before, after, 10_000, 0.6)
    assert split is not None
    assert split["busy_pct"] == pytest.approx(50.0)
    assert split["all"] == pytest.approx(200.0)  # 2 s / 10,000 messages
    assert split["postgres"] == pytest.approx(75.0)
    assert split["kafka"] == pytest.approx(25.0)
    assert split["harness"] == pytest.approx(10.0)
    assert split["relays"] == pytest.approx(60.0)
    assert split["other"] == pytest.approx(30.0)  # 2 - 0.75 - 0.25 - 0.1 - 0.6 s


def test_a_pid_reused_by_another_group_counts_from_zero() -> None:
    before = {"pids": {"7": ("kafka", 9.0)}, "harness": 0.0, "machine": _machine(0, 0)}
    after = {"pids": {"7": ("postgres", 0.5)}, "harness": 0.0, "machine": _machine(100, 100)}
    assert procs.CLOCK_TICKS == 100  # 100 busy ticks: 1 s
    split = cpu_split.per_message(before, after, 1000, None)
    assert split is not None
    assert (split["postgres"], split["kafka"], split["relays"]) == (500.0, 0.0, None)
    assert split["other"] == pytest.approx(500.0)  # the relays unknown: in the rest


def test_no_window_no_split() -> None:
    snap = {"pids": {}, "harness": 0.0, "machine": _machine(0, 0)}
    assert cpu_split.per_message(None, snap, 100, None) is None
    assert cpu_split.per_message(snap, snap, 0, None) is None
    assert cpu_split.per_message(snap, snap, 100, None) is None  # no tick elapsed
    # 49 busy ticks (0.49 s) over all cores: mostly rounding, not split; 50 are.
    short = {**snap, "machine": _machine(49, 200)}
    assert cpu_split.per_message(snap, short, 100, None) is None
    enough = {**snap, "machine": _machine(50, 200)}
    assert cpu_split.per_message(snap, enough, 100, None) is not None
    assert cpu_split.per_message({**snap, "machine": None}, snap, 100, None) is None


def test_a_snapshot_reads_this_machine() -> None:
    spent = 0.0
    for _ in range(200_000):  # some CPU of its own for the harness to show
        spent += 1.0
    snap = cpu_split.snapshot()
    assert snap["harness"] is not None
    assert 0 < snap["harness"] == pytest.approx(procs.cpu_seconds(os.getpid()), abs=0.05)
    assert snap["machine"] is not None
    assert len(snap["machine"]) >= 8
    assert sum(snap["machine"]) > 0
    assert set(group for group, _seconds in snap["pids"].values()) <= {"postgres", "kafka"}
    assert all(seconds >= 0 for _group, seconds in snap["pids"].values())
    assert spent == 200_000


def test_the_drain_section_shows_the_split_per_system_and_workers() -> None:
    def drain(system: str, workers: int, all_us: float, relays: float | None) -> dict:
        split = {"busy_pct": 80.0, "all": all_us, "relays": relays}
        split |= {"postgres": 14.0, "kafka": 6.0, "harness": 3.5, "other": 1.0}
        return {"system": system, "workers": workers, "machine_cpu": split}

    drains = [
        drain("ours", 1, 36.0, 11.5),
        drain("ours", 1, 40.0, 14.5),
        drain("baseline", 1, 27.0, 5.5),
        drain("ours", 2, 45.0, None),
        {"system": "baseline", "workers": 2, "machine_cpu": None},  # too short to split
    ]
    lines = report_drain._machine_cpu(drains, ["ours", "baseline"])
    rows = [line for line in lines if line.startswith("| ours") or line.startswith("| base")]
    assert rows == [
        "| ours | 1 | 80 (80-80) | 38.0 (36.0-40.0) | 13.0 (11.5-14.5) | 14.0 (14.0-14.0) "
        "| 6.0 (6.0-6.0) | 3.5 (3.5-3.5) | 1.0 (1.0-1.0) |",
        "| baseline | 1 | 80 | 27.0 | 5.5 | 14.0 | 6.0 | 3.5 | 1.0 |",
        "| ours | 2 | 80 | 45.0 | n/a | 14.0 | 6.0 | 3.5 | 1.0 |",
    ]
    assert report_drain._machine_cpu([{**drains[-1]}], ["baseline"]) == []


def test_stat_cpu_seconds_reads_past_a_command_name_with_spaces_and_parens() -> None:
    # pid (comm) state, then fields 4-13; utime and stime are fields 14 and 15.
    rest = " ".join(["S", "1", "1", "1", "0", "-1", "4194560", "10", "0", "0", "0"])
    stat = f"4242 (a (b) c) {rest} 250 75 0 0 20 0 3"
    assert procs.stat_cpu_seconds(stat) == pytest.approx(325 / procs.CLOCK_TICKS)


def test_busy_time_is_every_tick_but_idle_and_iowait() -> None:
    # user 30, nice 5, system 10, idle 100, iowait 40, irq 3, softirq 2, steal 7: 57 busy
    # ticks of 197, taken as ticks (not back from a rounded share).
    start, end = [0] * 8, [30, 5, 10, 100, 40, 3, 2, 7]
    assert machine.busy_ticks(start, end) == 57
    assert machine.busy_ticks(None, end) is None
    assert machine.busy_ticks([0, 0, 0], [1, 1, 1]) is None  # no idle/iowait fields
    snap = {"pids": {}, "harness": 0.0}
    split = cpu_split.per_message({**snap, "machine": start}, {**snap, "machine": end}, 57, None)
    assert split is not None
    assert split["all"] == pytest.approx(TICK * 1e6)  # 57 ticks / 57 messages
    assert split["busy_pct"] == pytest.approx(100 * 57 / 197)
