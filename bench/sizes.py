"""How big each scenario runs: the full sizes of the published report and the quick ones
of the template's own test (correctness only). One frozen record, so a run's sizes travel
as one value and land in the report unchanged."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sizes:
    backlog: int
    keys: int
    size: int
    workers: tuple[int, ...]
    rates: tuple[int, ...]
    duration: float
    warmup: float
    tx_rate: float
    inbox_distinct: int
    inbox_duplicates: int
    inbox_timeout: float
    cost_seconds: float
    cost_rounds: int
    peer_cap: float
    drain_timeout: float
    # Drains of the backlog per repeat for ours, ours-debezium and the baseline, the median
    # kept (bench/rounds.py); the quick run makes two so the rounds are exercised.
    drain_rounds: int
    # Steady runs per rate and repeat for ours and the baseline, the median p99 kept: a
    # 30-s window's p99 is set by whichever of the host's slow phases fall in it.
    steady_rounds: int
    # Inbox ingests per repeat for ours and the baseline, the median rate kept: an ingest of
    # 3-4 s falls mostly in one of the host's phases, as a drain does.
    inbox_rounds: int
    # Many workers (bench/scale.py): processes joining one by one, then leaving; seconds
    # between changes; the load's items/s meanwhile.
    scale_workers: int
    scale_buckets: int
    scale_step: float
    scale_rate: int
    # Idle cost (bench/idle.py): seconds before the window opens, and the window.
    idle_warmup: float
    idle_seconds: float
    # Cost as the table grows (bench/growth.py): delivered rows already in the outbox table
    # per case, and the case that drains while retention purges that many.
    growth_rows: tuple[int, ...]
    growth_purge_rows: int
    # Memory (bench/memory.py): the backlog the relay drains and the consumer stores.
    memory_items: int
    # Mixed load (bench/mixed.py): POST /orders a second, payments a second, seconds of
    # both (the first `mixed_warmup` not counted), orders the payments go to, connections.
    mixed_rate: int
    mixed_inbox_rate: int
    mixed_seconds: float
    mixed_warmup: float
    mixed_orders: int
    mixed_connections: int


FULL = Sizes(
    backlog=100_000,
    keys=1000,
    size=1024,
    workers=(1, 2),
    rates=(200, 2000),
    duration=30,
    warmup=2,
    tx_rate=200,
    inbox_distinct=90_000,
    inbox_duplicates=10_000,
    inbox_timeout=300,
    cost_seconds=3,
    cost_rounds=3,
    peer_cap=60,
    drain_timeout=300,
    drain_rounds=5,
    steady_rounds=5,
    inbox_rounds=5,
    scale_workers=8,
    scale_buckets=256,
    scale_step=5,
    scale_rate=1000,
    idle_warmup=10,
    idle_seconds=60,
    growth_rows=(0, 1_000_000, 5_000_000),
    growth_purge_rows=5_000_000,
    memory_items=1_000_000,
    mixed_rate=1000,
    mixed_inbox_rate=500,
    mixed_seconds=30,
    mixed_warmup=3,
    mixed_orders=100,
    mixed_connections=64,
)
QUICK = Sizes(
    backlog=5_000,
    keys=100,
    size=1024,
    workers=(1, 2),
    rates=(200,),
    duration=5,
    warmup=1,
    tx_rate=100,
    inbox_distinct=4_500,
    inbox_duplicates=500,
    inbox_timeout=300,
    cost_seconds=1,
    cost_rounds=1,
    peer_cap=60,
    drain_timeout=120,
    drain_rounds=2,
    steady_rounds=2,
    inbox_rounds=2,
    scale_workers=3,
    scale_buckets=256,
    scale_step=3,
    scale_rate=200,
    idle_warmup=5,
    idle_seconds=6,
    growth_rows=(0, 20_000),
    growth_purge_rows=20_000,
    memory_items=20_000,
    mixed_rate=50,
    mixed_inbox_rate=50,
    mixed_seconds=5,
    mixed_warmup=1,
    mixed_orders=10,
    mixed_connections=8,
)
