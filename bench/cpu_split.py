"""Where a timed drain's CPU goes on the whole machine, per message: every process, and of
that PostgreSQL (every process named `postgres`: the server and its backends), the Kafka
broker (the JVMs running `kafka.Kafka`), the harness itself (this process: it reads the
topic back) and the relays (measured by the drain, bench/scenarios.py); the rest is what
else ran (Kafka Connect when it is up, the kernel's own threads).

Why: the machine has two cores, and while one relay drains, PostgreSQL, the broker, the
topic's reader and the relay share them. When the machine is busy through the window, the
rate is set by what a message costs all of them together, and a relay that costs more of its
own gives the others less (docs/benchmarks.md section 12). All figures come from /proc
(user + system time; a process that exits inside the window is not counted, which the
drains do not do: their backends and the broker live through it).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from . import procs
from .machine import busy_pct, busy_ticks, cpu_counters

Snapshot = dict[str, Any]
# Below this much busy time in the window (50 clock ticks over all cores) the split is
# mostly the kernel's 10 ms rounding: a quick run's drain of 5,000 messages is not split.
MIN_BUSY_S = 0.5


def _group(pid: str, comm: str) -> str | None:
    if comm == "postgres":
        return "postgres"
    if comm == "java":
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        return "kafka" if b"kafka.Kafka" in cmdline else None
    return None


def snapshot() -> Snapshot:
    """CPU seconds so far of every PostgreSQL and broker process (by pid), of this
    process, and the machine's /proc/stat counters."""
    groups: dict[str, tuple[str, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        group = _group(entry.name, comm)
        if group is not None:
            groups[entry.name] = (group, procs.stat_cpu_seconds(stat))
    return {
        "pids": groups,
        "harness": procs.cpu_seconds(os.getpid()),
        "machine": cpu_counters(),
    }


def per_message(
    before: Snapshot | None, after: Snapshot, messages: int, relays_s: float | None
) -> dict[str, float | None] | None:
    """CPU µs per message between two snapshots: all (busy time of every core), postgres,
    kafka, harness, relays (`relays_s`, the relays' own CPU seconds in the window, when
    measured), other (the rest), and busy_pct (share of all cores busy). None when a
    snapshot is missing, no message went, or the cores were busy for less than
    MIN_BUSY_S in all."""
    if before is None or messages <= 0 or not before["machine"] or not after["machine"]:
        return None
    start, end = before["machine"], after["machine"]
    ticks, busy = busy_ticks(start, end), busy_pct(start, end)
    if ticks is None or math.isnan(busy):
        return None
    # /proc/stat counts clock ticks over every core: busy ticks / ticks per second.
    busy_s = ticks / procs.CLOCK_TICKS
    if busy_s < MIN_BUSY_S:
        return None
    spent: dict[str, float] = {"postgres": 0.0, "kafka": 0.0}
    for pid, (group, seconds) in after["pids"].items():
        earlier = before["pids"].get(pid)
        spent[group] += seconds - (earlier[1] if earlier and earlier[0] == group else 0.0)
    harness = (after["harness"] or 0.0) - (before["harness"] or 0.0)
    known = spent["postgres"] + spent["kafka"] + harness + (relays_s or 0.0)
    scale = 1e6 / messages
    return {
        "busy_pct": busy,
        "all": busy_s * scale,
        "postgres": spent["postgres"] * scale,
        "kafka": spent["kafka"] * scale,
        "harness": harness * scale,
        "relays": None if relays_s is None else relays_s * scale,
        "other": max(busy_s - known, 0.0) * scale,
    }
