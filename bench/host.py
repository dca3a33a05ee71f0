"""How fast the host's cores run for us right now: a fixed unit of Python work, timed in the
thread's own CPU time, before the first timed run and during every one.

Why: on the shared virtual machines the bench runs on, the same unit of work (0.3 ms of
dict and integer operations) takes either its fast time or about 1.8 times that, flipping
within a second and in phases of seconds, with no CPU steal and the clock unchanged. That is
what a busy sibling hardware thread on the host looks like from inside a guest: our vCPU
runs, but slower. A timed drain of 3-5 s spends a different share of its time in the slow
mode from one run to the next (2-95% measured), and how much changes over hours. A
CPU-bound process slows more than one that waits on round trips, so a ratio between two
systems can follow that share; the load average and steal cannot see it, this records it
beside every result (bench/README.md says what it explained in two runs, and what not).

- `calibrate(seconds)`: the unit back to back, before the first timed run, to find the fast
  mode's time on this machine.
- `Sampler`: a child process that times two units every `interval` s during a timed run,
  keeping the second (0.6 ms a 0.1 s: 0.6% of one core): the share of the run's time the
  host was slow (bench/loop.py records it with the run).

A unit counts as slow when it took more than SLOW_FACTOR times the fast time, the fastest
tenth of the units seen so far in this process (`fast_us`): each machine calibrates itself,
and the reference only moves down.
"""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

# Slower than this times the fast time is the slow mode (the two modes measured 275-300
# and 480-560 µs on AMD EPYC family 25 model 17: 1.8x apart).
SLOW_FACTOR = 1.35
# Fewer units than this say nothing about a share (a 100-ms sampler needs 2 s of run).
MIN_UNITS = 20

_fast: list[float] = []  # the fastest tenth's boundary of each batch of units timed


def unit() -> int:
    """The fixed work: ~0.3 ms of dict and integer operations on one core."""
    total = 0
    table: dict[int, tuple[int, int]] = {}
    for i in range(3000):
        table[i & 255] = (i, total)
        total += len(table)
    return total


def _timed_unit() -> float:
    started = time.thread_time_ns()
    unit()
    return (time.thread_time_ns() - started) / 1000.0


def _learn(units: list[float]) -> None:
    """Lower the fast reference from a batch of unit times (its fastest tenth)."""
    if len(units) >= MIN_UNITS:
        _fast.append(sorted(units)[len(units) // 10])


def fast_us() -> float | None:
    """The fast mode's unit time (µs) as seen so far; None before any batch."""
    return min(_fast) if _fast else None


def summary(units: list[float]) -> dict[str, Any]:
    """The share of `units` in the slow mode (None when too few), their median, the fast
    reference they were judged by and how many there were."""
    _learn(units)
    fast = fast_us()
    share = None
    if fast is not None and len(units) >= MIN_UNITS:
        share = sum(1 for u in units if u > SLOW_FACTOR * fast) / len(units)
    return {
        "slow_share": share,
        "unit_us": statistics.median(units) if units else None,
        "fast_us": fast,
        "units": len(units),
    }


def probe(seconds: float = 1.0) -> dict[str, Any]:
    """The unit back to back for `seconds`; see `summary`."""
    for _ in range(10):  # warm the interpreter's caches for the unit's code
        unit()
    units: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        units.append(_timed_unit())
    return summary(units)


def calibrate(seconds: float = 5.0) -> float | None:
    """Probe in 1-s rounds for `seconds` to find the fast mode before the first run (the
    host may be slow for a few seconds at a time); the fast reference afterwards."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        probe(min(1.0, max(deadline - time.monotonic(), 0.1)))
    return fast_us()


class Sampler:
    """Times two units every `interval` seconds, keeping the second, in a child process
    (this file run as a script) between start() and stop(); stop() returns `summary` of
    them. A process of its own: in this one it would hold the GIL beside the topic reader's
    thread, whose receive times are the latencies."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self._child: subprocess.Popen[str] | None = None

    def start(self) -> Sampler:
        self._child = subprocess.Popen(
            [sys.executable, str(Path(__file__)), str(self.interval)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        return self

    def stop(self) -> dict[str, Any]:
        """The child stops at the end of its stdin and prints one unit time a line."""
        if self._child is None:
            return summary([])
        out, _ = self._child.communicate("", timeout=30)
        units = []
        for line in out.splitlines():
            with contextlib.suppress(ValueError):
                units.append(float(line))
        return summary(units)


def _sample(interval: float) -> None:
    """The child: two units every `interval` s until stdin closes, then the second ones'
    times on stdout, one a line."""
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    for _ in range(10):
        unit()
    units = []
    while not done.wait(interval):
        # The first unit after the sleep runs on cold caches (10-15% slower on an idle
        # host); the second is the one the host's state sets.
        _timed_unit()
        units.append(_timed_unit())
    sys.stdout.write("".join(f"{u:.1f}\n" for u in units))


if __name__ == "__main__":
    _sample(float(sys.argv[1]))
