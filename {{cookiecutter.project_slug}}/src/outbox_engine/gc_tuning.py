"""Python's cyclic garbage collector, set for a long-running relay process.

Contract: `tune_gc(threshold)` is called once by a process's entry point (worker, consumer,
api), after its imports and wiring and before it starts its work. It collects what startup
left, moves every object alive then into the collector's permanent generation
(`gc.freeze()`), and sets the first generation's threshold to `threshold` allocations
(the older generations' thresholds stay). `threshold=0` leaves the collector as Python set
it. Reference counting, which frees almost everything, is not affected: only objects in
reference cycles wait for a collection, and still get one.

Why, measured on the bench machine (a worker relaying a 100k backlog on Python 3.12, CPU of
its process from /proc, 4 runs each): with Python's defaults (700 allocations; 2,000 on
3.13; nothing frozen) a message cost the worker 26-31 us of CPU, with this call 18-20 us.
A claimed batch's records live across several first-generation collections, so they are
promoted and soon trigger full collections, and each full collection walked the ~130,000
objects the imports left (SQLAlchemy, pydantic, OpenTelemetry): 60-70 ms each, a pause of
the relay too. Frozen, those objects are no longer walked; at 10,000 allocations a batch
mostly dies before a collection sees it. docs/performance.md has the figures. The
in-process helpers (tests, `drain()`) never call this: it changes the state of the whole
interpreter.
"""

from __future__ import annotations

import gc
import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)

DEFAULT_GC_THRESHOLD = 10_000


@dataclass(frozen=True)
class GcState:
    """What `tune_gc` did: the thresholds now in force and how many objects it froze."""

    thresholds: tuple[int, int, int]
    frozen: int


def check_gc_threshold(threshold: int, name: str = "gc threshold") -> None:
    """Raise ValueError, naming the setting `name`, unless `threshold` is 0 or more."""
    if threshold < 0:
        raise ValueError(f"{name} must be 0 (Python's defaults) or more, not {threshold}")


def tune_gc(threshold: int = DEFAULT_GC_THRESHOLD) -> GcState:
    """Freeze what startup left and set the first generation's threshold (0: no change)."""
    check_gc_threshold(threshold)
    first, second, third = gc.get_threshold()
    if threshold == 0:
        state = GcState((first, second, third), gc.get_freeze_count())
        log.info("gc: left as Python set it, thresholds %s", state.thresholds)
        return state
    gc.collect()
    gc.freeze()
    gc.set_threshold(threshold, second, third)
    state = GcState((threshold, second, third), gc.get_freeze_count())
    log.info("gc: %d objects of startup frozen, thresholds %s", state.frozen, state.thresholds)
    return state
