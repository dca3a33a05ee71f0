"""The steady scenario's second-by-second view (bench/steady.py) and its table in the report
(bench/report_steady.py): a stall and a slower run must read differently."""

from __future__ import annotations

import sys

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))
from bench import report_steady, steady


def _run(latency_ms: dict[int, float], per_second: int = 100, seconds: int = 5) -> tuple:
    """Commits spread evenly over `seconds`; item i's latency is latency_ms[its second],
    else 2 ms. Returns (commits, first_at)."""
    commits: dict[int, float] = {}
    first_at: dict[int, float] = {}
    for seq in range(per_second * seconds):
        committed = 1000.0 + seq / per_second
        commits[seq] = committed
        first_at[seq] = committed + latency_ms.get(seq // per_second, 2.0) / 1000
    return commits, first_at


def test_a_stall_is_one_second_far_above_a_flat_median() -> None:
    commits, first_at = _run({3: 40.0})
    series = steady.p99_by_second(commits, first_at, skip=0)
    assert series == [2.0, 2.0, 2.0, 40.0, 2.0]
    worst = steady.worst_second(series)
    assert worst == {
        "median_ms": 2.0,
        "worst_ms": 40.0,
        "worst_at_s": 3,
        "seconds_over_2x": 1,
        "seconds": 5,
    }


def test_a_run_slower_throughout_has_a_higher_median_and_no_outlier() -> None:
    commits, first_at = _run({i: 9.0 for i in range(5)})
    worst = steady.worst_second(steady.p99_by_second(commits, first_at, skip=0))
    assert worst is not None
    assert (worst["median_ms"], worst["worst_ms"], worst["seconds_over_2x"]) == (9.0, 9.0, 0)


def test_the_warm_up_undelivered_items_and_thin_seconds_are_left_out() -> None:
    commits, first_at = _run({0: 500.0})
    # The first second is warm-up (skipped); two items of second 2 never arrived; the last
    # second holds 10 items only (< MIN_ITEMS_PER_SECOND): no p99 of its own.
    del first_at[250], first_at[251]
    for seq in range(500, 510):
        commits[seq] = 1005.0 + (seq - 500) / 100
        first_at[seq] = commits[seq] + 0.003
    series = steady.p99_by_second(commits, first_at, skip=100)
    assert series == [2.0, 2.0, 2.0, 2.0, None]
    worst = steady.worst_second(series)
    assert worst is not None
    assert worst["seconds"] == 4
    assert steady.p99_by_second(commits, first_at, skip=10_000) == []
    assert steady.worst_second([None, None]) is None


def test_the_report_shows_every_repeat_in_order() -> None:
    def run(system: str, worst: float, at: int, cpu: float) -> dict:
        return {
            "system": system,
            "rate": 2000,
            "worst_second": {
                "median_ms": 8.0,
                "worst_ms": worst,
                "worst_at_s": at,
                "seconds_over_2x": 1 if worst > 16 else 0,
                "seconds": 30,
            },
            "cpu_us_per_msg": cpu,
            "machine_cpu": {"busy_pct": 30.0, "all": 100.0},
        }

    lines = report_steady._by_second(
        [run("ours", 37.5, 27, 40.0), run("ours", 10.0, 4, 42.0), run("baseline", 9.0, 1, 20.0)],
        ["ours", "baseline"],
    )
    rows = [line for line in lines if line.startswith("| ours") or line.startswith("| baseline")]
    assert len(rows) == 2
    assert "37.5 (s 27) / 10.0 (s 4)" in rows[0]
    assert "| 1 / 0 |" in rows[0]
    assert "41.0 (40.0-42.0)" in rows[0]
    assert "9.0 (s 1)" in rows[1]
    assert report_steady._by_second([{"system": "ours", "rate": 200}], ["ours"]) == []


def test_the_split_at_the_produce_call_cuts_each_item_in_two() -> None:
    # 100 measured items after 10 of warm-up: items 10-98 are produced 1 ms after their
    # commit and read 3 ms after that; item 99 waits 40 ms in the relay, then 3 ms; item 50
    # has no producer timestamp (a broker-stamped message) and item 60 never arrived: both
    # are left out.
    commits = {seq: 1000.0 + seq / 100 for seq in range(110)}
    created = {seq: t + 0.001 for seq, t in commits.items()}
    created[99] = commits[99] + 0.040
    first_at = {seq: created[seq] + 0.003 for seq in commits}
    del created[50], first_at[60]
    cut = steady.produce_split(commits, first_at, created, skip=10)
    assert cut is not None
    assert cut["items"] == 98
    assert round(cut["to_produce_p50"], 6) == 1.0
    assert round(cut["after_produce_p50"], 6) == 3.0
    assert round(cut["after_produce_p99"], 6) == 3.0
    # The one slow item is the top 1% of 98: p99 is the 97th of 98 sorted, still 1 ms; two
    # slow items put it at 40 ms, and only on the relay's side.
    assert round(cut["to_produce_p99"], 6) == 1.0
    created[98] = commits[98] + 0.040
    first_at[98] = created[98] + 0.003
    cut = steady.produce_split(commits, first_at, created, skip=10)
    assert cut is not None
    assert round(cut["to_produce_p99"], 6) == 40.0
    assert round(cut["after_produce_p99"], 6) == 3.0
    assert steady.produce_split(commits, first_at, {}, skip=10) is None
    assert steady.produce_split(commits, first_at, created, skip=10_000) is None


def test_the_report_shows_the_split_per_repeat_and_leaves_out_runs_without_one() -> None:
    def run(system: str, before: float, after: float) -> dict:
        return {
            "system": system,
            "rate": 2000,
            "produce_split": {
                "items": 60_000,
                "to_produce_p50": before / 4,
                "to_produce_p99": before,
                "after_produce_p50": after / 2,
                "after_produce_p99": after,
            },
        }

    debezium = {"system": "ours-debezium", "rate": 2000, "produce_split": None}
    lines = report_steady._split(
        [run("ours", 9.7, 9.1), run("ours", 7.2, 6.6), run("baseline", 5.3, 6.1), debezium],
        ["ours", "ours-debezium", "baseline"],
    )
    rows = [line for line in lines if line.startswith("| ")][2:]
    assert rows == [
        "| ours | 2,000 | 2.4 / 1.8 | 9.7 / 7.2 | 4.5 / 3.3 | 9.1 / 6.6 |",
        "| baseline | 2,000 | 1.3 | 5.3 | 3.0 | 6.1 |",
    ]
    assert report_steady._split([debezium], ["ours-debezium"]) == []
