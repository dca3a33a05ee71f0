"""The process entry points' collector setting (outbox_engine/gc_tuning.py). Each case runs
in a fresh interpreter: `tune_gc` changes the whole interpreter's collector, which the test
process must keep as it is."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from outbox_engine.inbox.app import ConsumerOptions
from outbox_engine.relay.options import WorkerOptions

PROBE = """
import gc, json, sys, weakref
from outbox_engine import tune_gc

class Node:
    pass

def cycle():
    a, b = Node(), Node()
    a.other, b.other = b, a
    return a

kept = Node()                        # alive at startup: frozen, never walked again
gc.collect()
before = gc.get_threshold()
frozen_before = gc.get_freeze_count()      # an interpreter may freeze a few at its start
state = tune_gc(int(sys.argv[1]))
frozen_kept = not any(o is kept for o in gc.get_objects())
# A cycle made after the call becomes garbage; the collector must still find it by itself,
# triggered by allocations alone (no gc.collect() here). It counts objects allocated and
# not yet freed, so the new lists are kept.
collected = []
garbage = cycle()
weakref.finalize(garbage, collected.append, 1)
del garbage
held = []
while not collected and len(held) < 200_000:
    held.extend([] for _ in range(100))
allocations = len(held)
print(json.dumps({
    "before": before, "frozen_before": frozen_before,
    "thresholds": state.thresholds, "now": gc.get_threshold(),
    "frozen": state.frozen, "freeze_count": gc.get_freeze_count(),
    "frozen_kept": frozen_kept, "collected": bool(collected), "allocations": allocations,
}))
"""


def probe(threshold: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE), str(threshold)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_the_threshold_is_set_startup_frozen_and_new_cycles_still_collected() -> None:
    got = probe(10_000)
    # Python's own first threshold: 700 on 3.12, 2,000 on 3.13; the older two stay.
    assert got["before"][0] in (700, 2_000)
    assert got["thresholds"] == got["now"] == [10_000, *got["before"][1:]]
    # Everything alive at the call (the imports: thousands of objects) is frozen ...
    assert got["frozen"] == got["freeze_count"] > got["frozen_before"] + 1_000
    assert got["frozen_kept"] is True
    # ... and a cycle made later is collected without an explicit collect, after about
    # one threshold's worth of allocations (10,000 here), not Python's 700 or 2,000.
    assert got["collected"] is True
    assert 9_000 <= got["allocations"] <= 11_000, got["allocations"]


def test_zero_leaves_the_collector_as_python_set_it() -> None:
    got = probe(0)
    assert got["thresholds"] == got["now"] == got["before"]
    assert got["frozen"] == got["freeze_count"] == got["frozen_before"]
    assert got["frozen_kept"] is False
    assert got["collected"] is True
    assert got["allocations"] <= got["before"][0], got["allocations"]


_REFUSED = r"^{} must be 0 \(Python.s defaults\) or more, not -1$"


def test_a_negative_threshold_is_refused_everywhere() -> None:
    from outbox_engine import tune_gc

    with pytest.raises(ValueError, match=_REFUSED.format("gc threshold")):
        tune_gc(-1)
    with pytest.raises(ValueError, match=_REFUSED.format("gc_threshold")):
        WorkerOptions(gc_threshold=-1)
    with pytest.raises(ValueError, match=_REFUSED.format("gc_threshold")):
        ConsumerOptions(service_name="s", gc_threshold=-1)
    assert WorkerOptions().gc_threshold == ConsumerOptions(service_name="s").gc_threshold
    assert WorkerOptions().gc_threshold == 10_000
