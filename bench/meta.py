"""What the report says about the run besides its results: when, on what, how settled,
the sizes, and the notes of each section."""

from __future__ import annotations

import datetime as dt
import math
import os
import statistics
import time
from typing import Any

from . import machine
from .compare import HOST_LINE
from .configs import config_lines
from .context import PARTITIONS
from .loop import Outcome, settle_counts
from .pg import Postgres
from .rounds import all_runs
from .settle import QUIET_ACTIVE_PCT, QUIET_WINDOW_S
from .sizes import Sizes
from .systems import OURS_DEBEZIUM, OWN_SYSTEMS, System


def load_note(outcome: Outcome) -> str:
    records = [r["settle"] for rows in outcome.results.values() for r in all_runs(rows)]
    if not records:
        return "No timed run completed."
    active = [float(r.get("cpu_active_pct", math.nan)) for r in records]
    known = [a for a in active if not math.isnan(a)]
    loud = [r for r in records if not r["quiet"]]
    quiet = len(records) - len(loud)
    measured = (
        f"median {statistics.median(known):.1f}%, max {max(known):.1f}%; "
        if known
        else "not known (no /proc/stat); "
    )
    text = (
        f"The CPU (every core, I/O wait counted) in the {QUIET_WINDOW_S:g} s before the timed "
        f"runs started: {measured}{quiet} of {len(records)} runs started quiet (below "
        f"{QUIET_ACTIVE_PCT:g}% active)."
    )
    if not loud:
        return text
    busy = [float(r.get("cpu_active_pct", math.nan)) for r in loud]
    seen = [b for b in busy if not math.isnan(b)]
    at = f"{statistics.median(seen):.0f}% active (median)" if seen else "of unknown activity"
    return text + (
        f" **Not every run could start on a quiet machine: the {len(loud)} others started "
        f"after the bounded wait with the CPU {at} (other work shared its cores), so their "
        "absolute numbers are low and noisy; the ratios of the same repeat are what to read, "
        "and section 10 shows how active the CPU was when each run started.**"
    )


def settle_note(outcome: Outcome, run_wait_s: float) -> str:
    counts = settle_counts(outcome.results)
    return (
        f"Before each of the {counts['timed_runs']} timed runs: `VACUUM (ANALYZE)` of the "
        f"run's database ({counts['vacuum_analyze']} done), `CHECKPOINT` "
        f"({counts['checkpoints']} done), then a wait of at most {run_wait_s:.0f} s for the "
        f"CPU below {QUIET_ACTIVE_PCT:g}% active over {QUIET_WINDOW_S:g} s "
        f"({counts['quiet_at_start']} runs started quiet)."
    )


def _cpu_line() -> str:
    identity = machine.cpu_identity()
    return f"{machine.cpu_model()} ({identity})" if identity else machine.cpu_model()


def steal_line(pct: float) -> str:
    if math.isnan(pct):
        return "CPU steal during the timed runs: not known (no /proc/stat)"
    return (
        f"CPU steal during the timed runs: {pct:.2f}% of all CPU time (/proc/stat: time the "
        "hypervisor ran other guests while this machine's runs waited for a core)"
    )


def host_line(outcome: Outcome) -> str:
    """The host's slow share over the timed runs (bench/host.py), e.g. "Host cores in the
    slow mode during the timed runs: median 35% of their time (2%-89%, 120 runs; a fast unit
    277 µs; ...)"; bench.compare reads the median back."""
    shares = []
    fast = None
    for rows in outcome.results.values():
        for r in all_runs(rows):
            during = r["settle"].get("host_during") or {}
            if during.get("slow_share") is not None:
                shares.append(float(during["slow_share"]))
                fast = during.get("fast_us") or fast
    if not shares:
        return f"{HOST_LINE}: not measured"
    return (
        f"{HOST_LINE}: median {statistics.median(shares):.0%} of their time "
        f"({min(shares):.0%}-{max(shares):.0%}, {len(shares)} runs; a fast unit "
        f"{fast:.0f} µs; bench/host.py: a unit of Python work taking 1.35x its fast time or "
        "more, as when the host's sibling hardware threads are busy; steal does not show it)"
    )


def metadata(
    sizes: Sizes,
    repeats: int,
    systems: list[System],
    pg: Postgres,
    started: float,
    run_started: float,
    fill_seconds: dict[str, float],
    outcome: Outcome,
    run_wait_s: float,
    cpu_before: list[int] | None = None,
) -> dict[str, Any]:
    """`cpu_before`: /proc/stat's counters when the timed runs started (the steal line)."""
    peers = [s.name for s in systems if s.name not in OWN_SYSTEMS]
    return {
        "repeats": repeats,
        "seed": outcome.seed,
        "orders": outcome.orders,
        "settle_note": settle_note(outcome, run_wait_s),
        "started": dt.datetime.fromtimestamp(run_started, dt.UTC).strftime("%Y-%m-%d %H:%M"),
        "duration_min": (time.time() - started) / 60,
        "load_note": load_note(outcome),
        "machine": [
            f"CPU: {_cpu_line()}, {os.cpu_count()} cores; RAM {machine.ram_gib():.0f} GiB",
            steal_line(machine.steal_pct(cpu_before, machine.cpu_counters())),
            host_line(outcome),
            f"PostgreSQL {pg.version()} (scripts/postgres.sh, its defaults: fsync on), "
            f"Apache Kafka {machine.kafka_version()} (KRaft, one broker, scripts/kafka.sh)",
            f"Python {machine.python_version(str(systems[0].python))} for every system",
            "Versions: "
            + "; ".join(
                f"{s.name}: " + ", ".join(f"{k} {v}" for k, v in s.versions.items())
                for s in systems
            ),
            "Backlog fill (not measured; each system's create API, all in parallel), "
            "done after: " + ", ".join(f"{k} {v:.0f}s" for k, v in fill_seconds.items()),
        ],
        "backlog": sizes.backlog,
        "drain_rounds": sizes.drain_rounds,
        "steady_rounds": sizes.steady_rounds,
        "scale_step": sizes.scale_step,
        "scale_rate": sizes.scale_rate,
        "idle_warmup": sizes.idle_warmup,
        "idle_seconds": sizes.idle_seconds,
        "mixed_seconds": sizes.mixed_seconds,
        "mixed_warmup": sizes.mixed_warmup,
        "mixed_orders": sizes.mixed_orders,
        "mixed_connections": sizes.mixed_connections,
        "size": sizes.size,
        "keys": sizes.keys,
        "duration": sizes.duration,
        "warmup": sizes.warmup,
        "cap_note": (
            f"Peers are stopped after {sizes.peer_cap:.0f} s (at their rate a full drain would "
            "take minutes per run); their rate is over what they delivered by then, from a "
            "backlog that was still deep, so the claim cost is comparable."
            if peers
            else ""
        ),
        "tx_note": (
            f"The load commits {sizes.tx_rate:.0f} transactions/s on one connection, one after "
            "the other (commit order = creation order): at 200 items/s one item per "
            "transaction, at 2,000 items/s ten items per transaction (the batch create API of "
            "each system)."
        ),
        "inbox_note": (
            f"{sizes.inbox_distinct + sizes.inbox_duplicates:,} messages on an {PARTITIONS}-partition topic, "
            f"{sizes.inbox_duplicates:,} of them repeating an earlier `message-id`; the consumer "
            "starts from scratch (a new group) and stores them. rows/s = stored rows / "
            "(last - first `created_at`, the transaction time of the first and last batch), "
            "so consumer start-up and group join are not counted; consumed msgs/s counts the "
            "duplicates too. Ours: `<slug> consumer` (batches of 500, one INSERT ... SELECT "
            "FROM the batch as JSON rows and a `bytea[]` of payloads ... ON CONFLICT DO NOTHING "
            "per batch, with its NOTIFY and the check of the rows it did not store, then the "
            "batch's offset commit, sent from a thread of its own; the next batch is fetched "
            "and prepared while one is written). The peers are not run here: "
            "faststream-outbox has no inbox; omni-box's inbox runner was not wired up in this "
            "harness yet."
        ),
        "cost_note": (
            f"One session, sequential transactions, {sizes.cost_rounds} rounds per repeat of "
            f"{sizes.cost_seconds:.0f} s per mode, the modes interleaved in blocks of 10 "
            "transactions (so a checkpoint, an autovacuum or a busy neighbour lands on both), "
            "each transaction timed: `INSERT INTO bench_orders ... "
            "RETURNING id` alone vs. the same plus the system's create call for one ~1 KB item "
            "in the same transaction: ours `outbox.create(session, OrderOutboxItem, "
            "event_key=str(order_id), event_name=..., payload=<bytes>)` (one statement: "
            "the INSERT and the pg_notify), faststream-outbox `broker.publish(doc, queue=..., session=session)`, "
            "omni-box `repo.create(domain.create_outbox_event(...))`, the baseline a prepared "
            "INSERT and a NOTIFY; ours-debezium the same create() as ours, with its box's "
            "capture trigger writing the capture row while the connector streams. Added time "
            "per tx = the mean time of a transaction with / without - 1, each mode's slowest "
            "1% left out (a stall of the machine delays the one transaction then running, of "
            "either mode by chance); tx/s = 1 / that mean. Beside it the same from all "
            "transactions and from the medians."
        ),
        "targets": [],  # filled from the results in docs.write
        "configs": config_lines(sizes, peers, debezium=OURS_DEBEZIUM in [s.name for s in systems]),
    }
