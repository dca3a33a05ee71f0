"""The create-cost scenario's arithmetic (bench/drivers/common.py `cost_summary`,
bench/scenarios.py `cost_figures`): a stall of the machine, which delays the one transaction
then running, must not move the headline; a cost create() adds to every transaction must."""

from __future__ import annotations

import sys

import pytest

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))
from bench import scenarios
from bench.drivers import common


def test_summary_of_one_mode_in_microseconds() -> None:
    # 199 transactions of 1 ms and one of 201 ms: mean 2 ms, the trimmed mean drops the one.
    durations = [0.001] * 199 + [0.201]
    found = common.cost_summary(durations)
    assert found["count"] == 200
    assert found["mean_us"] == pytest.approx(2000.0)
    assert found["trimmed_mean_us"] == pytest.approx(1000.0)
    assert found["median_us"] == pytest.approx(1000.0)
    # The 199th of 200 (index 198): the one slow transaction is above the p99.
    assert found["p99_us"] == pytest.approx(1000.0)
    assert common.cost_summary([0.001] * 197 + [0.201] * 3)["p99_us"] == pytest.approx(201_000.0)


def test_trim_drops_one_percent_and_no_more() -> None:
    # 1,000 transactions: 10 dropped. Twenty slow ones: ten of them stay in the mean.
    durations = [0.001] * 980 + [0.011] * 20
    found = common.cost_summary(durations)
    assert found["trimmed_mean_us"] == pytest.approx((980 * 1000 + 10 * 11_000) / 990)
    # Under 100 transactions nothing is dropped.
    assert common.cost_summary([0.001] * 98 + [0.101])["trimmed_mean_us"] == pytest.approx(
        (98 * 1000 + 101_000) / 99
    )


def test_no_transactions_is_an_error() -> None:
    with pytest.raises(ValueError, match="no transactions"):
        common.cost_summary([])


def test_a_stall_in_one_mode_does_not_move_the_headline() -> None:
    without = [0.001] * 2000
    with_ = [0.00125] * 1999 + [0.300]  # create() adds 250 µs; one 300 ms stall
    figures = scenarios.cost_figures(
        {"without": common.cost_summary(without), "with": common.cost_summary(with_)}
    )
    assert figures["overhead_pct"] == pytest.approx(25.0)
    assert figures["overhead_pct_median"] == pytest.approx(25.0)
    # All transactions: the stall adds 150 µs a transaction to the mode it hit.
    assert figures["overhead_pct_all"] == pytest.approx((1999 * 1250 + 300_000) / 2000 / 10 - 100)
    assert figures["without"] == pytest.approx(1000.0)
    assert figures["with"] == pytest.approx(800.0)
    assert figures["without"] / figures["with"] - 1 == pytest.approx(0.25)


def test_a_cost_on_every_transaction_is_kept() -> None:
    # create() adds 400 µs to every transaction and a 5 ms page split to one in fifty: the
    # splits are 2% of the mode, over the trimmed 1%, so half of them stay in the mean.
    without = [0.001] * 5000
    with_ = [0.0014] * 4900 + [0.0064] * 100
    figures = scenarios.cost_figures(
        {"without": common.cost_summary(without), "with": common.cost_summary(with_)}
    )
    kept = (4900 * 1400 + 50 * 6400) / 4950
    assert figures["overhead_pct"] == pytest.approx(kept / 10 - 100)
    assert figures["overhead_pct"] > 45
    assert figures["overhead_pct_median"] == pytest.approx(40.0)
