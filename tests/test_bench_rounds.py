"""Rounds (bench/rounds.py): a short drain made several times in a repeat, the median kept.

What the ratios use is one real run, the one with the median value (of an even number the
lower middle); every round stays in the results (its value, host share, whether it was kept)
and whole beside the kept one, so the correctness checks and the settle counts see every
timed run; the rounds alternate the systems' order (A B B A) so a drift within a case lands
on every system alike; only the short runs get rounds: the drains of ours, ours-debezium and
the baseline, ours' and the baseline's steady windows and their inbox ingests.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))
from bench import checks, loop, registry, rounds, sizes, systems


def _drain(rate: float, slow: float | None = 0.2, **fields: Any) -> dict[str, Any]:
    return {
        "system": "ours",
        "workers": 1,
        "rate": rate,
        "complete": True,
        "delivered": 100,
        "order_violations": 0,
        "keyless": 0,
        "problems": [],
        "settle": {
            "checkpoint": 1,
            "vacuum_analyze": 1,
            "quiet": True,
            "host_during": {"slow_share": slow},
        },
        **fields,
    }


def test_the_median_round_is_kept_whole_and_every_round_is_listed() -> None:
    made = [_drain(30_000, 0.9), _drain(41_000, 0.1), _drain(36_000, 0.4)]
    kept = rounds.keep_median(made, "rate")
    assert kept["rate"] == 36_000
    assert kept["settle"]["host_during"]["slow_share"] == 0.4  # the kept run's own record
    assert (kept["round"], kept["kept"]) == (2, True)
    assert kept["rounds"] == [
        {"round": 0, "rate": 30_000.0, "host_slow": 0.9, "kept": False},
        {"round": 1, "rate": 41_000.0, "host_slow": 0.1, "kept": False},
        {"round": 2, "rate": 36_000.0, "host_slow": 0.4, "kept": True},
    ]
    assert [(r["rate"], r["round"], r["kept"]) for r in kept["other_rounds"]] == [
        (30_000, 0, False),
        (41_000, 1, False),
    ]
    assert [r["rate"] for r in rounds.every_run(kept)] == [36_000, 30_000, 41_000]


def test_an_even_number_keeps_the_lower_middle_and_one_run_is_left_as_it_is() -> None:
    kept = rounds.keep_median([_drain(5.0), _drain(3.0)], "rate")
    assert (kept["rate"], kept["round"]) == (3.0, 1)
    assert len(kept["other_rounds"]) == 1
    single = _drain(7.0)
    assert rounds.keep_median([single], "rate") is single
    assert "rounds" not in single
    assert rounds.every_run(single) == [single]
    with pytest.raises(ValueError, match="at least one"):
        rounds.keep_median([], "rate")


def test_rounds_alternate_the_order() -> None:
    names = ["baseline", "ours", "ours-debezium"]
    assert [rounds.round_order(names, i) for i in range(4)] == [
        names,
        names[::-1],
        names,
        names[::-1],
    ]


def test_a_lost_message_in_a_round_not_kept_still_fails_the_run() -> None:
    good, bad = _drain(40_000), _drain(20_000, complete=False, delivered=99, order_violations=3)
    kept = rounds.keep_median([good, bad, _drain(30_000)], "rate")
    assert kept["rate"] == 30_000
    failures = checks.correctness({"drain": [kept]}, sizes.FULL)
    assert failures == [
        f"drain ours w1: 99/{sizes.FULL.backlog} delivered",
        "drain ours w1: 3 order violations, 0 keyless",
    ]
    bad["settle"]["checkpoint"] = 0
    assert "drain ours: run was not settled before timing" in checks.correctness(
        {"drain": [kept]}, sizes.FULL
    )
    counts = loop.settle_counts({"drain": [kept]})
    assert (counts["timed_runs"], counts["checkpoints"]) == (3, 2)


def test_only_the_short_runs_are_made_in_rounds(tmp_path: Path) -> None:
    def system(name: str, **fields: Any) -> systems.System:
        return systems.System(name, Path("python"), "driver.py", {}, **fields)

    lineup = [
        system("ours", inbox=True),
        system("ours-debezium", boxes_file=tmp_path / "boxes.yaml"),
        system("baseline", inbox=True),
        system("faststream-outbox"),
        system("omni-box"),
    ]
    made = {
        (scenario.name, s.name): scenario.rounds(sizes.FULL, s)
        for scenario in registry.SCENARIOS
        for s in lineup
    }
    assert {k: v for k, v in made.items() if v != 1} == {
        ("drain", "ours"): 5,
        ("drain", "ours-debezium"): 5,
        ("drain", "baseline"): 5,
        ("steady", "ours"): 5,
        ("steady", "baseline"): 5,
        ("inbox", "ours"): 5,
        ("inbox", "baseline"): 5,
    }
    # The quick run exercises the rounds too.
    quick = sizes.QUICK
    assert (quick.drain_rounds, quick.steady_rounds, quick.inbox_rounds) == (2, 2, 2)


def _steady(p99: float, undelivered: int = 0, violations: int = 0) -> dict[str, Any]:
    return {
        "system": "baseline",
        "rate": 200,
        "repeat": 0,
        "p99": p99,
        "undelivered": undelivered,
        "order_violations": violations,
        "latencies": [1.0] * 50,
        "problems": [],
        "settle": {
            "checkpoint": 1,
            "vacuum_analyze": 1,
            "quiet": True,
            "load1": 0.5,
            "cpu_active_pct": 2.0,
            "quiet_wait_s": 1.0,
            "settle_s": 0.4,
            "host_during": {"slow_share": 0.5},
        },
    }


def test_a_steady_round_not_kept_that_lost_items_still_fails_the_run() -> None:
    kept = rounds.keep_median([_steady(9.0), _steady(250.0, undelivered=7), _steady(6.0)], "p99")
    assert (kept["p99"], kept["round"]) == (9.0, 0)
    assert checks.correctness({"steady": [kept]}, sizes.FULL) == [
        "steady baseline 200/s: 7 undelivered, 0 order violations"
    ]


def test_the_results_file_drops_every_rounds_latencies(tmp_path: Path) -> None:
    from bench import results_files

    kept = rounds.keep_median([_steady(9.0), _steady(5.0), _steady(7.0)], "p99")
    kept.update(case="200/s", position=0)
    for other in kept["other_rounds"]:
        other.update(case="200/s", position=0, repeat=0)
    outcome = loop.Outcome(seed=1, orders=[["baseline"]], results={"steady": [kept]})
    doc = results_files.document(outcome, [registry.BY_NAME["steady"]], ["baseline"], {})
    (run,) = doc["runs"]["steady"]
    assert "latencies" not in run
    assert len(run["other_rounds"]) == 2
    assert all("latencies" not in r for r in run["other_rounds"])
    assert len(kept["latencies"]) == 50  # the plots' input stays in memory
    made = results_files.csv_rows(outcome, [registry.BY_NAME["steady"]])
    assert [(r["round"], r["kept"], r["value"]) for r in made] == [
        (2, True, "7.000"),
        (0, False, "9.000"),
        (1, False, "5.000"),
    ]


def test_the_steady_report_lists_every_round_with_the_kept_one_in_bold() -> None:
    from bench import report_steady

    made = [_steady(9.04), _steady(250.0), _steady(6.0)]
    kept = rounds.keep_median(made, "p99")
    lines = report_steady._rounds([kept], ["ours", "baseline"])
    assert "runs ours and the baseline 3 times per rate" in lines[0]
    assert "the median of 3 windows" in lines[0]
    assert lines[2:] == ["- baseline, 200/s: **9.0** / 250.0 / 6.0", ""]
    assert "run once" not in lines[0]  # every system of this run is made in rounds
    assert report_steady._rounds([_steady(1.0)], ["baseline"]) == []
    # The systems run once are named from the run's systems, not by hand.
    full = ["ours", "ours-debezium", "baseline", "faststream-outbox", "omni-box"]
    said = report_steady._rounds([kept], full)[0]
    assert "runs ours and the baseline 3 times" in said
    assert "ours-debezium and the peers run once" in said
    said = report_steady._rounds([kept], ["ours", "baseline", "omni-box"])[0]
    assert "the baseline 3 times per rate" in said
    assert " omni-box runs once: its p99 is set by its own polling." in said


def test_the_report_lists_every_round_with_the_kept_one_in_bold() -> None:
    from bench import report_drain
    from bench.rounds import keep_median

    def run(rate: float) -> dict[str, object]:
        return {"system": "ours", "workers": 1, "repeat": 0, "rate": rate, "settle": {}}

    kept = keep_median([run(30_000.0), run(45_000.0), run(38_000.0)], "rate")
    lines = report_drain._rounds([kept], ["ours", "baseline"])
    assert "drains ours, ours-debezium and the baseline 3 times" in lines[0]
    assert lines[2:] == ["- ours, 1 worker(s): 30,000 / 45,000 / **38,000**", ""]
    assert report_drain._rounds([run(1.0)], ["ours"]) == []


def _inbox(
    rate: float, lost: int = 0, twice: int = 0, problems: tuple[str, ...] = ()
) -> dict[str, Any]:
    return {
        "system": "baseline",
        "repeat": 0,
        "rate": rate,
        "consumed_rate": rate * 1.1,
        "stored": 90_000 - lost + twice,
        "lost": lost,
        "stored_duplicates": twice,
        "rss_mb_peak": 80.0,
        "problems": list(problems),
        "settle": {"checkpoint": 1, "vacuum_analyze": 1, "quiet": True},
    }


def test_an_inbox_round_not_kept_that_lost_or_doubled_a_row_still_fails_the_run() -> None:
    made = [
        _inbox(30_000.0),
        _inbox(20_000.0, lost=2, twice=1),
        _inbox(25_000.0, problems=("exit 1",)),
    ]
    kept = rounds.keep_median(made, "rate")
    assert (kept["rate"], kept["round"]) == (25_000.0, 2)
    assert checks.correctness({"inbox": [kept]}, sizes.FULL) == [
        "inbox baseline: exit 1",
        "inbox baseline: lost 2, stored twice 1",
    ]


def test_the_inbox_report_lists_every_round_and_counts_every_rounds_losses() -> None:
    from bench import report_inbox

    kept = rounds.keep_median(
        [_inbox(30_000.0), _inbox(20_000.0, lost=2), _inbox(25_000.0)], "rate"
    )
    meta = {"inbox_note": "the note"}
    lines = report_inbox.render([kept], ["ours", "baseline"], meta)
    assert lines[:4] == ["## 3. Inbox ingest with duplicates", "", "the note", ""]
    row = next(line for line in lines if line.startswith("| baseline |"))
    # The kept round's rate and stored rows; the lost column counts the round not kept too.
    assert row.split(" | ")[1:7] == ["25,000", "27,500", "1.00x", "90,000", "2", "0"]
    assert "ingests the topic 3 times per system" in lines[-4]
    assert lines[-2:] == ["- baseline: 30,000 / 20,000 / **25,000**", ""]
    assert report_inbox._rounds([_inbox(1.0)], ["baseline"]) == []
