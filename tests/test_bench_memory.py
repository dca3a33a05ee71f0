"""The memory scenario's flatness rule (bench/memory.py): the second half's highest RSS
against the first half's, so that warm-up early in the work is not taken for a leak and a
leak that grows with the work is."""

from __future__ import annotations

import sys

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))
from bench.memory import halves

TOTAL = 1_000_000


def _samples(rss: list[float]) -> list[tuple[float, float, int]]:
    """One sample per half second, the work done evenly over the samples (the last one
    done), the process up before the first."""
    n = len(rss)
    return [(i * 0.5, m, TOTAL * (i + 1) // n) for i, m in enumerate(rss)]


def test_warm_up_that_ends_in_the_first_half_is_flat() -> None:
    # The shape of the consumer of 2026-11-30 08:53 (repeat 1): start-up 54 -> 199 MiB
    # with nothing done yet (not counted), 167 -> 207 as the prefetch queue fills, a
    # plateau at 206-216 from a third of the work on. A tenth of the work in, the RSS was
    # 183: the old rule (peak after a tenth <= 1.10x the RSS at a tenth) said "not flat".
    startup = [(0.5 * i, m, 0) for i, m in enumerate([54.0, 64.7, 86.0, 101.1, 198.6])]
    working = _samples([166.6, 206.6, 182.7, 206.6, 214.4, 215.5, 215.5, 215.9, 215.9, 215.9])
    first, second, flat = halves(startup + working, TOTAL)
    assert (first, second, flat) == (214.4, 215.9, True)


def test_a_leak_that_grows_with_the_work_is_not_flat() -> None:
    # 150 MiB plus 40 MiB per million items: 170 at half way, 190 at the end (+11.8%).
    rss = [150.0 + 40.0 * (i + 1) / 20 for i in range(20)]
    first, second, flat = halves(_samples(rss), TOTAL)
    assert (first, second, flat) == (170.0, 190.0, False)


def test_the_limit_is_ten_percent_over_the_first_half() -> None:
    assert halves(_samples([100.0, 100.0, 110.0, 110.0]), TOTAL)[2] is True
    assert halves(_samples([100.0, 100.0, 110.0, 110.1]), TOTAL)[2] is False


def test_no_sample_in_a_half_cannot_tell() -> None:
    # A backlog gone within one sample interval: the samples before saw start-up only
    # (the process before it had memory, then importing), the next one all of it done.
    samples = [(0.1, 0.0, 0), (0.6, 0.2, 0), (1.1, 96.0, 0), (1.6, 108.0, TOTAL)]
    assert halves(samples, TOTAL) == (None, 108.0, None)
    # A process that never got past half its work.
    assert halves([(0.5, 80.0, 0), (1.0, 90.0, TOTAL // 4)], TOTAL) == (90.0, None, None)
