"""Machine facts for the results, and waiting for a quiet machine."""

from __future__ import annotations

import contextlib
import math
import os
import platform
import re
import subprocess
import time
from pathlib import Path

from .envs import log


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_identity(cpuinfo: str | None = None) -> str:
    """Family, model, stepping, clock and cache of the first CPU in /proc/cpuinfo, e.g.
    "family 26, model 2, stepping 1; 2,596 MHz; cache 1024 KB" ("" where there is none).

    Why: a virtual machine's "model name" can be a bare "AMD EPYC", whatever generation runs
    it. Two fresh machines that both printed only that drained the same commit at 14k and 32k
    msgs/s (one worker), and the ratios against the single-connection baseline moved with
    them; which CPUs they were, the report could not tell. Compare runs of the same family
    and model."""
    try:
        text = cpuinfo if cpuinfo is not None else Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    first: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if first:
                break
            continue
        key, _, value = line.partition(":")
        first.setdefault(key.strip(), value.strip())
    parts = []
    ids = [(k, first[k]) for k in ("cpu family", "model", "stepping") if first.get(k)]
    if ids:
        parts.append(", ".join(f"{k.removeprefix('cpu ')} {v}" for k, v in ids))
    with contextlib.suppress(KeyError, ValueError):
        parts.append(f"{float(first['cpu MHz']):,.0f} MHz")
    if first.get("cache size"):
        parts.append(f"cache {first['cache size']}")
    return "; ".join(parts)


def ram_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return float("nan")


def kafka_pid() -> int | None:
    """The broker's process id (changes when someone restarts the shared broker)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"kafka.Kafka" in cmdline.read_bytes():
                return int(cmdline.parent.name)
        except (OSError, ValueError):
            continue
    return None


def kafka_version() -> str:
    """The running broker's version, from its class path (kafka-<version>/libs)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "kafka.Kafka" in text:
            match = re.search(r"kafka[-_](\d+\.\d+\.\d+)", text)
            if match:
                return match.group(1)
    return os.environ.get("OUTBOX_KAFKA_VERSION", "unknown")


def python_version(python: str) -> str:
    out = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() or "unknown"


def load1() -> float:
    return os.getloadavg()[0]


def wait_for_quiet(
    threshold_pct: float, window_s: float, max_seconds: float
) -> tuple[bool, float, float]:
    """Wait until the machine's CPU was less than `threshold_pct` active (every core; waiting
    for I/O counts as active) over a window of `window_s`, at most `max_seconds`: (quiet,
    the active share of the last window, seconds waited). A wait of 0 measures one window.

    Why not the load average: it is a 1-minute decaying mean, so after a run that kept both
    cores busy for a few seconds it stays above 1.0 for ~40 s while nothing runs any more
    (the report of 2026-12-06: 85 of 174 runs waited a full 20 s and then found the CPU 1-3%
    busy). What the rule wants to know is whether anything still works right now: the
    previous run's processes, a checkpoint's writes, the broker flushing its log."""
    started = time.monotonic()
    deadline = started + max_seconds
    announced = False
    while True:
        active = active_pct(window_s)
        waited = time.monotonic() - started
        if active < threshold_pct or math.isnan(active):
            if announced:
                log(f"CPU {active:.0f}% active < {threshold_pct:g}% after {waited:.0f}s: starting")
            return not math.isnan(active), active, waited
        if time.monotonic() >= deadline:
            if max_seconds > 0:
                log(f"CPU still {active:.0f}% active after {waited:.0f}s: running anyway")
            return False, active, waited
        if not announced:
            log(f"CPU {active:.0f}% active >= {threshold_pct:g}%; waiting up to {max_seconds:.0f}s")
            announced = True


def cpu_counters() -> list[int] | None:
    """The machine-wide CPU time counters of /proc/stat's first line (None elsewhere)."""
    try:
        return [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None


def _share_pct(before: list[int] | None, after: list[int] | None, fields: tuple[int, ...]) -> float:
    """Share (%) of all CPU time between two `cpu_counters()` spent in `fields`; nan when
    unknown."""
    if not before or not after or min(len(before), len(after)) <= max(fields):
        return float("nan")
    total = sum(after) - sum(before)
    spent = sum(after[i] - before[i] for i in fields)
    return 100.0 * spent / total if total > 0 else float("nan")


def steal_pct(before: list[int] | None, after: list[int] | None) -> float:
    """Share of all CPU time between two `cpu_counters()` that the hypervisor gave to other
    guests (/proc/stat's 8th field, "steal"): on a shared host, time a timed run waited for
    a core it had no way to see otherwise. nan when unknown."""
    return _share_pct(before, after, (7,))


# /proc/stat's "idle" and "iowait" fields: every other tick (steal and irq too) is busy.
_NOT_BUSY = (3, 4)


def busy_ticks(before: list[int] | None, after: list[int] | None) -> int | None:
    """Clock ticks, over every core, between two `cpu_counters()` that were busy (neither
    idle nor waiting for I/O); None when unknown."""
    if not before or not after or min(len(before), len(after)) <= max(_NOT_BUSY):
        return None
    idle = sum(after[i] - before[i] for i in _NOT_BUSY)
    return sum(after) - sum(before) - idle


def busy_pct(before: list[int] | None, after: list[int] | None) -> float:
    """Share of all CPU time between two `cpu_counters()` that was busy (the ticks
    `busy_ticks` counts); nan when unknown."""
    return 100.0 - _share_pct(before, after, _NOT_BUSY)


# /proc/stat's "idle" field alone: for the quiet test, waiting for I/O is work not yet done.
_IDLE = (3,)


def active_pct(seconds: float = 1.0) -> float:
    """Share of all CPUs not idle over the next `seconds` (I/O wait counted as active; from
    /proc/stat, nan elsewhere)."""
    before = cpu_counters()
    time.sleep(seconds)
    return 100.0 - _share_pct(before, cpu_counters(), _IDLE)
