"""The paired steady scenario's bookkeeping (bench/paired.py): the baseline measured inside
ours' run counts as run in the same repeat and position (bench/ratios.py), its ratio lands in
the spreads the reproduction check compares, the report shows every repeat, and the checks
fail a pair whose loads did not start together or lost an item."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))
from bench import checks, paired, ratios, registry, report_steady, targets
from bench.sizes import QUICK

SETTLED = {"checkpoint": 1, "vacuum_analyze": 1}


def _side(system: str, p50: float, p99: float, **extra: Any) -> dict[str, Any]:
    return {
        "system": system,
        "rate": 200,
        "p50": p50,
        "p99": p99,
        "undelivered": 0,
        "order_violations": 0,
        **extra,
    }


def _pair(repeat: int, ours_p99: float, base_p99: float, gap: float = 0.05) -> dict[str, Any]:
    return {
        **_side("ours", 2.0, ours_p99),
        "case": "200/s",
        "repeat": repeat,
        "position": 1,
        "settle": {"load1": 0.5, **SETTLED},
        "start_gap_s": gap,
        "partner": {"baseline": _side("baseline", 1.5, base_p99, settle=SETTLED)},
        "p99_ratio": ours_p99 / base_p99,
        "problems": [],
    }


def test_the_partner_counts_as_run_in_the_same_repeat() -> None:
    rows = [_pair(0, 6.0, 4.0), _pair(1, 3.0, 3.0)]
    scenario = registry.BY_NAME["pair"]
    found = ratios.repeat_rows(scenario, rows, ["ours", "baseline", "omni-box"])
    assert [(r["repeat"], r["values"], r["ratios"]) for r in found] == [
        (0, {"ours": 6.0, "baseline": 4.0}, {"baseline": 1.5}),
        (1, {"ours": 3.0, "baseline": 3.0}, {"baseline": 1.0}),
    ]
    assert found[0]["positions"] == {"ours": 1, "baseline": 1}
    assert found[0]["load1"] == {"ours": 0.5, "baseline": 0.5}
    spread = ratios.spreads(found)
    assert [(s["scenario"], s["case"], s["vs"], s["min"], s["max"], s["n"]) for s in spread] == [
        ("pair", "200/s", "baseline", 1.0, 1.5, 2)
    ]
    # And the targets table reads it as its own row, every repeat.
    rows_found = targets._every_repeat(found, "pair", "200/s", "baseline", 1.2, at_most=True)
    assert rows_found == ("1.50 / 1.00x", False)


def test_only_ours_runs_it_and_with_both_rates() -> None:
    scenario = registry.BY_NAME["pair"]
    assert scenario.key == "steady_paired"
    assert [scenario.label(c) for c in scenario.cases(QUICK)] == ["200/s"]
    names = {"ours": True, "ours-debezium": False, "baseline": False, "omni-box": False}
    for name, expected in names.items():
        system = type("S", (), {"name": name})()
        assert paired.applies(system, {"rate": 200}) is expected, name


def test_the_report_shows_every_repeat_and_its_ratio() -> None:
    lines = report_steady.paired([_pair(1, 3.0, 3.0, gap=0.2), _pair(0, 6.0, 4.0)])
    assert "### Side by side: ours and the baseline loaded at once" in lines
    body = [line for line in lines if line.startswith("| 200 |")]
    assert body == [
        "| 200 | 1 | 2.0 / 6.0 | 1.5 / 4.0 | 1.50x | 50 |",
        "| 200 | 2 | 2.0 / 3.0 | 1.5 / 3.0 | 1.00x | 200 |",
    ]
    assert report_steady.paired([]) == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, []),
        ({"start_gap_s": 1.5}, ["pair 200/s: the two loads started 1.5 s apart"]),
        ({"problems": ["exited early (1): boom"]}, ["pair 200/s: exited early (1): boom"]),
    ],
)
def test_checks_fail_a_pair_that_was_not_one_window(
    change: dict[str, Any], expected: list[str]
) -> None:
    row = {**_pair(0, 6.0, 4.0), **change}
    assert checks.correctness({"steady_paired": [row]}, QUICK) == expected


def test_checks_fail_a_pair_whose_baseline_lost_items() -> None:
    row = _pair(0, 6.0, 4.0)
    row["partner"]["baseline"]["undelivered"] = 3
    assert checks.correctness({"steady_paired": [row]}, QUICK) == [
        "pair baseline 200/s: 3 undelivered, 0 order violations"
    ]


def test_checks_fail_a_pair_whose_baseline_was_not_settled() -> None:
    row = _pair(0, 6.0, 4.0)
    row["partner"]["baseline"]["settle"] = {"checkpoint": 0, "vacuum_analyze": 1}
    assert checks.correctness({"steady_paired": [row]}, QUICK) == [
        "pair baseline: its database was not settled"
    ]
