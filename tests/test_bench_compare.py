"""`python -m bench.compare FIRST SECOND` says whether a second run reproduces the first's
ratios: per (scenario, case, other system) the change of the median, within the tolerance
or not, whether the second median lies inside the first run's own range over its repeats,
and an exit code a script can use (0 all within, 1 one is not, 2 nothing shared or not a
results file). Tried at the edges: exactly at the tolerance, just past it in either
direction, exactly at the first run's min, outside the tolerance but inside a wide range, a
ratio only one run has, a zero median, a file that is not a results file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT, load_bench_module


def _spread(scenario: str, case: str, vs: str, median: float) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "case": case,
        "vs": vs,
        "min": median * 0.9,
        "median": median,
        "max": median * 1.1,
        "rel_spread": 0.2,
        "n": 3,
    }


def _results(path: Path, started: str, spreads: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"started": started, "repeats": 3, "spreads": spreads}))
    return path


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench.compare", *map(str, args)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_changes_at_and_past_the_tolerance(tmp_path: Path) -> None:
    compare = load_bench_module("compare")
    first = _results(
        tmp_path / "a.json",
        "2026-11-23 22:33",
        [
            _spread("drain", "w1", "baseline", 1.25),
            _spread("drain", "w1", "faststream-outbox", 10.0),
            _spread("inbox", "", "baseline", 0.5),
            _spread("steady", "200/s", "baseline", 1.0),
            _spread("cost", "", "omni-box", 0.2),
        ],
    )
    second = _results(
        tmp_path / "b.json",
        "2026-11-26 19:00",
        [
            _spread("drain", "w1", "baseline", 1.4375),  # +15.0%: at the limit, within
            _spread("drain", "w1", "faststream-outbox", 8.4),  # -16%: not
            _spread("inbox", "", "baseline", 0.58),  # +16%: not
            _spread("steady", "200/s", "baseline", 0.9),  # -10%: within
            _spread("growth", "5M", "baseline", 0.8),  # only in the second
        ],
    )
    a = compare.load(first).spreads
    b = compare.load(second).spreads
    rows = compare.compare(a, b, 0.15)
    assert [r["key"] for r in rows] == [
        ("drain", "w1", "baseline"),
        ("drain", "w1", "faststream-outbox"),
        ("inbox", "", "baseline"),
        ("steady", "200/s", "baseline"),
    ]
    assert [round(r["change"], 4) for r in rows] == [0.15, -0.16, 0.16, -0.1]
    assert [r["within"] for r in rows] == [True, False, False, True]
    # The first run's ranges are median -10%..+10%: only 0.9 (exactly its min) is inside.
    assert [r["in_range"] for r in rows] == [False, False, False, True]

    done = _run(first, second)
    assert done.returncode == 1, done.stderr
    table = done.stdout.splitlines()
    assert table[0].startswith("| scenario | case | ours vs | first run (2026-11-23 22:33)")
    assert "| drain | w1 | baseline | 1.25x (1.12-1.38, 3 repeats) |" in table[2]
    assert table[0].endswith("| change | within 15% | in the first's range |")
    assert table[2].endswith("| +15.0% | yes | no |")
    assert table[3].endswith("| -16.0% | NO | no |")
    assert table[5].endswith("| -10.0% | yes | yes |")
    assert "2 of 4 ratios within 15%." in done.stdout
    assert "1 of 4 second-run medians inside the first run's own range" in done.stdout
    assert "Only in the first run (not compared): cost//omni-box." in done.stdout
    assert "Only in the second run (not compared): growth/5M/baseline." in done.stdout

    # A wider tolerance accepts both; the same file against itself is all within.
    assert _run(first, second, "--tolerance", "0.2").returncode == 0
    same = _run(first, first)
    assert same.returncode == 0
    assert "5 of 5 ratios within 15%." in same.stdout
    assert "5 of 5 second-run medians inside the first run's own range" in same.stdout


def test_outside_the_tolerance_but_inside_a_wide_first_range(tmp_path: Path) -> None:
    """A first run whose repeats spread 0.53 (drain w1 vs the baseline, 2026-11-26): a second
    median 30% higher is no reproduction by the tolerance, but a value the first run made
    itself; one past its max is neither. The exit code follows the tolerance only."""
    wide = {**_spread("drain", "w1", "baseline", 1.15), "min": 1.12, "max": 1.73}
    first = _results(tmp_path / "a.json", "day 1", [wide])
    inside = _results(tmp_path / "b.json", "day 2", [_spread("drain", "w1", "baseline", 1.5)])
    past = _results(tmp_path / "c.json", "day 3", [_spread("drain", "w1", "baseline", 1.74)])
    done = _run(first, inside)
    assert done.returncode == 1
    assert done.stdout.splitlines()[2].endswith("| +30.4% | NO | yes |")
    assert "0 of 1 ratios within 15%." in done.stdout
    assert "1 of 1 second-run medians inside the first run's own range" in done.stdout
    beyond = _run(first, past)
    assert beyond.returncode == 1
    assert beyond.stdout.splitlines()[2].endswith("| +51.3% | NO | no |")


def test_a_zero_median_is_never_within(tmp_path: Path) -> None:
    compare = load_bench_module("compare")
    zero = {("cost", "", "baseline"): _spread("cost", "", "baseline", 0.0)}
    some = {("cost", "", "baseline"): _spread("cost", "", "baseline", 0.0)}
    (row,) = compare.compare(zero, some, 0.15)
    assert row["within"] is False
    assert compare.change(0.0, 0.0) != compare.change(0.0, 0.0)  # nan


def test_nothing_shared_or_not_a_results_file_exits_2(tmp_path: Path) -> None:
    first = _results(tmp_path / "a.json", "day 1", [_spread("drain", "w1", "baseline", 1.0)])
    second = _results(tmp_path / "b.json", "day 2", [_spread("idle", "", "baseline", 1.0)])
    done = _run(first, second)
    assert done.returncode == 2
    assert "share no ratio" in done.stderr
    (tmp_path / "c.json").write_text(json.dumps({"runs": []}))
    bad = _run(first, tmp_path / "c.json")
    assert bad.returncode == 2
    assert "not a bench results file" in bad.stderr
    missing = _run(first, tmp_path / "absent.json")
    assert missing.returncode == 2


@pytest.mark.parametrize("tolerance", ["0", "-0.1", "10"])
def test_a_tolerance_that_is_not_a_fraction_is_refused(tmp_path: Path, tolerance: str) -> None:
    first = _results(tmp_path / "a.json", "day 1", [_spread("drain", "w1", "baseline", 1.0)])
    done = _run(first, first, "--tolerance", tolerance)
    assert done.returncode == 2  # argparse's usage error
    assert "--tolerance" in done.stderr


def _with_cpu(path: Path, cpu: str) -> Path:
    doc = json.loads(path.read_text())
    doc["machine"] = [cpu, "PostgreSQL 15"]
    path.write_text(json.dumps(doc))
    return path


def test_the_machines_of_both_runs_are_named_and_a_difference_said(tmp_path: Path) -> None:
    zen5 = "CPU: AMD EPYC (family 26, model 2, stepping 1; 2,596 MHz; cache 1024 KB), 2 cores"
    zen4 = "CPU: AMD EPYC (family 25, model 17, stepping 1; 2,400 MHz; cache 1024 KB), 2 cores"
    spreads = [_spread("drain", "w1", "baseline", 1.5)]
    first = _with_cpu(_results(tmp_path / "a.json", "day 1", spreads), zen5)
    same = _with_cpu(_results(tmp_path / "b.json", "day 2", spreads), zen5)
    other = _with_cpu(_results(tmp_path / "c.json", "day 2", spreads), zen4)
    bare = _with_cpu(_results(tmp_path / "d.json", "day 0", spreads), "CPU: AMD EPYC, 2 cores")

    done = _run(first, same)
    assert done.returncode == 0
    assert "Both runs: AMD EPYC (family 26, model 2" in done.stdout
    differ = _run(first, other)
    assert differ.returncode == 0  # the note does not change the verdict on the ratios
    assert "The machines differ" in differ.stdout
    assert "family 25, model 17" in differ.stdout
    unknown = _run(bare, first)
    assert "The first run's file does not name the CPU's family and model" in unknown.stdout
    assert (
        "Machines: not known for both runs."
        in _run(_results(tmp_path / "e.json", "day 3", spreads), first).stdout
    )


def _with_steady(path: Path, undelivered: dict[str, int], steal: str | None = None) -> Path:
    """The file's steady runs at 2000/s (three repeats a system): `undelivered` per system in
    repeat 2, 0 elsewhere; its CPU steal line and broker warm-up when `steal` is given."""
    doc = json.loads(path.read_text())
    doc["runs"] = {
        "steady": [
            {"system": system, "case": "2000/s", "repeat": repeat, "undelivered": left}
            for system in ("ours", "baseline", "faststream-outbox", "omni-box")
            for repeat in range(3)
            for left in [undelivered.get(system, 0) if repeat == 1 else 0]
        ],
        # Runs of a scenario without the count, and a value that is not a count: ignored.
        "drain": [{"system": "omni-box", "case": "w1", "repeat": 0, "complete": False}],
        "inbox": [{"system": "baseline", "case": "", "repeat": 0, "undelivered": "many"}],
    }
    if steal is not None:
        doc["machine"] = [f"CPU steal during the timed runs: {steal}% of all CPU time (...)"]
        doc["broker_warmup"] = {
            "bulk": {"rounds": [{"broker_us_per_msg": 17.8}, {"broker_us_per_msg": 7.52}]}
        }
    path.write_text(json.dumps(doc))
    return path


def test_latency_against_a_system_that_fell_behind_is_shown_not_counted(tmp_path: Path) -> None:
    """faststream-outbox left 29,553 of 60,000 items undelivered in one repeat of the first
    run and none in the second: its ratio (-50%) is in the table, marked, and out of the
    count and the exit code. omni-box fell behind in the second run only: out as well. Ours
    falling behind is no reason to leave a ratio out: ours vs the baseline still counts."""
    compare = load_bench_module("compare")
    spreads = [
        _spread("steady", "2000/s", "baseline", 1.0),
        _spread("steady", "2000/s", "faststream-outbox", 0.002),
        _spread("steady", "2000/s", "omni-box", 0.001),
        _spread("drain", "w1", "omni-box", 40.0),
    ]
    later = [
        _spread("steady", "2000/s", "baseline", 1.1),  # +10%: within
        _spread("steady", "2000/s", "faststream-outbox", 0.001),  # -50%: not counted
        _spread("steady", "2000/s", "omni-box", 0.0015),  # +50%: not counted
        _spread("drain", "w1", "omni-box", 30.0),  # -25%: counted, not within
    ]
    first = _with_steady(
        _results(tmp_path / "a.json", "day 1", spreads),
        {"faststream-outbox": 29_553, "ours": 7},
        steal="0.59",
    )
    second = _with_steady(
        _results(tmp_path / "b.json", "day 2", later), {"omni-box": 41_950}, steal="2.94"
    )
    one, two = compare.load(first), compare.load(second)
    assert one.behind == {("steady", "2000/s", "faststream-outbox"): 29_553}
    assert two.behind == {("steady", "2000/s", "omni-box"): 41_950}
    rows = compare.compare(one.spreads, two.spreads, 0.15, (one.behind, two.behind))
    assert [r["counted"] for r in rows] == [True, False, False, True]
    assert [r["within"] for r in rows] == [True, False, False, False]

    done = _run(first, second)
    assert done.returncode == 1  # the drain's -25%, not the two left out
    table = done.stdout.splitlines()
    assert table[2].endswith("| +10.0% | yes | yes |")
    assert table[3].endswith("| -50.0% | not counted | no |")
    assert table[4].endswith("| +50.0% | not counted | no |")
    assert table[5].endswith("| -25.0% | NO | no |")
    assert "1 of 2 ratios within 15%." in done.stdout
    assert "1 of 2 second-run medians inside" in done.stdout
    assert (
        "Not counted (2): the other system left measured items undelivered in a repeat"
        in done.stdout
    )
    assert (
        "steady 2000/s faststream-outbox: 29,553 in the first run and 0 in the second run; "
        "steady 2000/s omni-box: 0 in the first run and 41,950 in the second run." in done.stdout
    )
    assert (
        "Machine state: the first run CPU steal 0.59%, the broker's warm-up 17.8 / 7.5 µs a "
        "message; the second run CPU steal 2.94%, the broker's warm-up 17.8 / 7.5 µs a "
        "message." in done.stdout
    )

    # Without the drain's ratio everything counted is within: exit 0. With only ratios that
    # do not count, the runs share nothing to judge: exit 2.
    steady_only = [s for s in later if s["scenario"] == "steady"]
    kept = _with_steady(_results(tmp_path / "c.json", "day 2", steady_only), {"omni-box": 41_950})
    assert _run(first, kept).returncode == 0
    lone = _results(
        tmp_path / "d.json", "day 2", [_spread("steady", "2000/s", "faststream-outbox", 0.002)]
    )
    nothing = _run(first, lone)
    assert nothing.returncode == 2
    assert "share no ratio that counts" in nothing.stderr
    assert "Machine state: the first run CPU steal 0.59%" in nothing.stdout
    assert "the second run not in its file." in nothing.stdout


def _with_host(path: Path, median_pct: int | None) -> Path:
    doc = json.loads(path.read_text())
    if median_pct is not None:
        doc["machine"] = [
            f"{load_bench_module('compare').HOST_LINE}: median {median_pct}% of their time (2-89%, "
            "16 runs; a fast unit 287 µs; bench/host.py: ...)"
        ]
    path.write_text(json.dumps(doc))
    return path


def test_the_hosts_state_of_both_runs_is_compared(tmp_path: Path) -> None:
    """Medians 15 points apart are the same state, 16 are not; a file without the line
    says so; the note never changes the verdict on the ratios."""
    spreads = [_spread("drain", "w1", "baseline", 1.5)]
    first = _with_host(_results(tmp_path / "a.json", "day 1", spreads), 20)
    near = _with_host(_results(tmp_path / "b.json", "day 2", spreads), 35)
    far = _with_host(_results(tmp_path / "c.json", "day 2", spreads), 36)
    old = _with_host(_results(tmp_path / "d.json", "day 0", spreads), None)

    same = _run(first, near)
    assert same.returncode == 0
    assert "Host state: the cores slow 20% and 35% of the timed runs' time" in same.stdout
    assert "the host's cores slow 20% of the timed runs' time (median)" in same.stdout
    differ = _run(first, far)
    assert differ.returncode == 0
    assert "Host state differs: the cores slow 20% of the first run's" in differ.stdout
    assert "36% of the second's" in differ.stdout
    assert "not measured in the first run" in _run(old, first).stdout
    assert "not measured in either run" in _run(old, old).stdout
