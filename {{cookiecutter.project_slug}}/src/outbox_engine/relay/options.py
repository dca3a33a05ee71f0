"""Every knob of a worker process, in one frozen dataclass.

The console script's `worker` command, the in-process test helpers and the engine's
`drain()` all build a worker from a `WorkerOptions` (relay/app.py), so one place knows the
worker's constructor and a new knob is added once, with its default here.
"""

from __future__ import annotations

from dataclasses import dataclass

from outbox_engine.gc_tuning import DEFAULT_GC_THRESHOLD, check_gc_threshold


@dataclass(frozen=True)
class WorkerOptions:
    # The boxes to process (empty: every box of the registry).
    boxes: tuple[str, ...] = ()
    # Lanes per box: lane i processes the owned buckets b with b % concurrency == i.
    concurrency: int = 1
    # Lane 0 claims for every lane until a claim leaves a backlog behind (relay/lane_group.py);
    # off: the lanes claim apart at any load.
    join_lanes: bool = False
    # Seconds each lane gets to finish its batch after SIGTERM/SIGINT.
    shutdown_timeout: float = 30.0
    # PostgreSQL application_name prefix of the lock connection (host and pid appended).
    application_name: str = "outbox-worker"
    # Seconds between bucket rebalances (a join, leave or loss rebalances at once).
    rebalance_interval: float = 1.0
    # Seconds between backlog samples for the depth gauges.
    depth_interval: float = 15.0
    # Seconds between Kafka metadata checks (readiness), when a box relays to Kafka.
    kafka_check_interval: float = 5.0
    # The probe port: None turns the probes off, 0 picks a free port (logged).
    probe_port: int | None = None
    probe_host: str = "127.0.0.1"
    # The Debezium relay's replication slot, for the slot-lag gauge (None: not sampled).
    debezium_slot: str | None = None
    # Seconds between deletes of old capture rows (when a box is relayed by Debezium).
    capture_upkeep_interval: float = 60.0
    # The garbage collector's first threshold, set by `WorkerApp.serve` (gc_tuning.py);
    # 0 leaves Python's collector as it is.
    gc_threshold: int = DEFAULT_GC_THRESHOLD

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        check_gc_threshold(self.gc_threshold, "gc_threshold")
