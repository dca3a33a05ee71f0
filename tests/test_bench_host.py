"""bench/host.py tells the host's fast and slow modes apart: a unit counts as slow above
SLOW_FACTOR times the fastest tenth seen so far, the reference only moves down, too few
units say nothing, and the sampler really runs beside the caller in a child process."""

from __future__ import annotations

import sys
import time

import pytest

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))
from bench import host


@pytest.fixture(autouse=True)
def _fresh_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host, "_fast", [])


def test_share_of_units_above_the_factor_of_the_fast_time() -> None:
    result = host.summary([300.0] * 15 + [500.0] * 5)
    assert result["fast_us"] == 300.0
    assert result["slow_share"] == 0.25
    assert result["units"] == 20
    assert result["unit_us"] == 300.0


def test_exactly_at_the_factor_is_fast_and_just_past_it_slow() -> None:
    host.summary([100.0] * 20)
    at = 100.0 * host.SLOW_FACTOR
    assert host.summary([at] * 20)["slow_share"] == 0.0
    assert host.summary([at + 0.1] * 20)["slow_share"] == 1.0


def test_a_run_all_in_the_slow_mode_is_judged_by_the_earlier_fast_time() -> None:
    """Judged against itself it would look fast: the reference only moves down."""
    host.summary([280.0] * 30)
    slow = host.summary([505.0] * 30)
    assert slow["fast_us"] == 280.0
    assert slow["slow_share"] == 1.0
    faster = host.summary([250.0] * 20)
    assert faster["fast_us"] == 250.0


def test_too_few_units_give_no_share_and_teach_nothing() -> None:
    result = host.summary([300.0] * (host.MIN_UNITS - 1))
    assert result["slow_share"] is None
    assert result["fast_us"] is None
    assert host.summary([])["unit_us"] is None


def test_the_fast_reference_is_the_fastest_tenth_not_one_outlier() -> None:
    """One unit timed short (a clock quirk) does not become the fast time."""
    host.summary([10.0] + [300.0] * 29)
    assert host.fast_us() == 300.0


def test_calibrate_and_the_sampler_time_real_units() -> None:
    fast = host.calibrate(1.0)
    assert fast is not None
    assert 1.0 < fast < 100_000.0
    sampler = host.Sampler(interval=0.1).start()
    time.sleep(3.0)
    result = sampler.stop()
    # ~29 in 3 s at one a 0.1 s, less the child's start-up.
    assert 15 <= result["units"] <= 31
    assert result["slow_share"] is not None
    assert 0.0 <= result["slow_share"] <= 1.0
    assert result["unit_us"] > 0


def test_a_sampler_never_started_or_stopped_at_once_has_no_share() -> None:
    assert host.Sampler().stop()["units"] == 0
    started = host.Sampler(interval=0.1).start()
    assert started.stop()["slow_share"] is None
