"""How each system was configured, written next to the results."""

from __future__ import annotations

from typing import Any


def config_lines(sizes: Any, peers: list[str], debezium: bool = False) -> list[str]:
    lines = [
        "Common to all: the same items (~1 KB JSON value with its sequence number, key = one of "
        f"{sizes.keys:,} keys, so per-key order is checkable), an {8}-partition topic per run, "
        "producer `acks=all`, idempotence on, `linger.ms` 1 (our default), each relay process started fresh "
        "on a fresh copy of its database, OpenTelemetry off, log level WARNING. Worker "
        "processes = OS processes of the relay.",
        "",
        "- **ours**: the default bake (`cookiecutter` with no answers), `<slug> worker --box "
        "order_outbox_item` (default 2 lanes per process, batch_size 500, 16 buckets, "
        "LISTEN/NOTIFY + 1 s poll, retry strategies exponential_backoff + latest_available); "
        "items written with `Outbox.create_batch` (backlog, 2,000/s load) and `Outbox.create` "
        "(200/s load); inbox `<slug> consumer` (consume_batch_size 500). Rows are kept "
        "(status UPDATE).",
        "- **baseline**: no framework (bench/drivers/baseline.py): asyncpg + confluent-kafka, "
        "a table with only the primary key, the unique uuid and the partial pending index by "
        "(bucket, id); claim up to 500 pending rows of the process's buckets (16 buckets, "
        "process i of n owns b % n == i, one index range scan per bucket, prepared; its "
        "session runs with `enable_seqscan = off` like ours, see the notes), produce "
        "all, wait for every delivery report, one `UPDATE ... SET status = 2 WHERE id = "
        "ANY(...)`, loop; LISTEN/NOTIFY when idle. Rows are kept. Inbox: batches of 500, one "
        "`unnest` INSERT ... ON CONFLICT (uuid) DO NOTHING, then a synchronous offset commit.",
    ]
    if debezium:
        lines.append(
            "- **ours-debezium**: the same bake with `relay: debezium` for its outbox box: "
            "Debezium's PostgreSQL connector (pgoutput, one task) with the outbox event router "
            "on Kafka Connect (distributed mode, one worker, scripts/connect.sh), configured by "
            "the engine's `connector_config` unchanged (every key and why: the baked project's "
            "docs/debezium.md) and registered per run through the engine's `register` (its own "
            "publication and slot first), then the box switched with `switch_to_debezium`. "
            "Drain: the switch copies the backlog's pending items to the capture table in one "
            "transaction (N items committed at once); one case, as the connector has one task. "
            "Steady: the trigger captures each item in its transaction. Create cost: the "
            "same `create()` as ours, the trigger adding the capture row, while the connector "
            "streams. Items written as for ours. The connector is deleted and its slot dropped "
            "after every run."
        )
    if "faststream-outbox" in peers:
        lines.append(
            "- **faststream-outbox**: its documented relay, an `OutboxBroker` subscriber "
            "stacked under a publisher of FastStream's confluent `KafkaBroker` (`acks='all'`, "
            "`enable_idempotence=True`, `linger_ms=1`); the handler returns "
            "`KafkaResponse(body, key=<item key>)`. Subscriber: `fetch_batch_size=500`, "
            "`max_workers=16` (concurrent handlers; its default is 1), "
            "`terminal_flush_batch_size=100` (batched DELETEs; default 1), "
            "`min_fetch_interval=0.05`, `max_fetch_interval=1.0`, LISTEN/NOTIFY via asyncpg, "
            "broker log level WARNING (its default INFO logs every message). Rows are deleted "
            "on success (its design). Items written with `broker.publish` / "
            "`broker.publish_batch` in the caller's session. Each handler awaits its own "
            "publish (one delivery report at a time per handler); with 16 concurrent handlers "
            "per-key order is not guaranteed by design, which the order-violation column shows."
        )
    if "omni-box" in peers:
        lines.append(
            "- **omni-box**: its outbox publisher loop as documented: per iteration a "
            "transaction of the caller's, `OutboxPublisher(PostgresOutboxRepository(session), "
            "KafkaEventPublisher(AIOKafkaProducer(acks='all', enable_idempotence=True, "
            "linger_ms=1), RawEventConverter())).publish_batch(batch_size=500)`; two such "
            "loops per process (like our two lanes); 50 ms sleep when idle (it has no NOTIFY "
            "wake-up). Its Kafka adapter is aiokafka-based (it has no confluent one) and awaits "
            "`send_and_wait` per event, events of a batch one after the other. Its fetch hands "
            "out only the head of each key (per-key order kept). Items written with "
            "`repo.create` / `repo.bulk_create`. The rows name a placeholder topic (the "
            "backlog is written once and copied per run); a thin proxy of the producer sends "
            "to the run's topic. structlog (its logger) filtered to warnings."
        )
    return lines
