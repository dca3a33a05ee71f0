"""The guarantees of docs/guarantees.md, measured: real api, worker and consumer processes
on real PostgreSQL and Kafka, load on both boxes, one fault per scenario, then counts
(created vs delivered, lost, order, duplicates, inbox effects). Run alone with
`pytest -m guarantees`; the table of numbers is printed at the end of the session."""

from __future__ import annotations

import pytest

from ..support import INBOX_BOX, OUTBOX_BOX, transport
from .conftest import Guarantees
from .faults import (
    KAFKA_CONTROL,
    PG_CONTROL,
    NetworkSandbox,
    disk_full,
    kill_consumer,
    kill_worker,
    missing,
    network_sandbox,
    network_trouble,
    outage,
    skewed_clock,
)
from .load import EXAMPLE_DOMAIN, Load
from .pg_faults import connection_killed, labelled, landed, lock_connection_killed, survived
from .report import Row
from .scenarios import Scenario
from .supervise import CONSUMERS, WORKERS
from .transports import ScriptedKafkaTransport

pytestmark = [pytest.mark.guarantees, pytest.mark.slow]


async def test_a_worker_sigkilled_mid_batch(guarantees: Guarantees) -> None:
    await guarantees.check(Scenario("worker-sigkill", fault=kill_worker))


# What each worker says of a box's lanes when it stops (relay/worker.py), with --join-lanes.
LANE_TURNS = {
    "splits": r"box {box}: lanes split (\d+) times",
    "joins": r"box {box}: lanes split \d+ times and joined again (\d+) times",
}


def _lanes_split_and_joined(row: Row) -> list[str]:
    failures = []
    for box in (OUTBOX_BOX, INBOX_BOX):
        splits, joins = row.facts.get(f"{box} splits", 0), row.facts.get(f"{box} joins", 0)
        if splits < 5 or joins < 5:
            failures.append(
                f"the lanes of {box} split {splits} and joined again {joins} times, fewer than "
                "5 each: the scenario did not test that mode"
            )
    return failures


async def test_a_worker_with_joined_lanes_sigkilled_mid_batch(guarantees: Guarantees) -> None:
    # With --join-lanes, lane 0 claims for both lanes of a box until a claim leaves a backlog,
    # then the lanes claim apart until each has taken everything (relay/lane_group.py).
    # Batches of 3 make the lanes split and join again many times a run (the outbox box on
    # its steady load, ~180 times; the inbox box about once per chunk of messages, so its
    # input comes in 15 chunks): each time buckets move between lanes mid-stream, and the
    # order and the inbox effects must hold across. The kill hands worker-0's buckets to
    # worker-1 on top. The workers' stop lines say how often; fewer than 5 times a box fails
    # the run, since it tested too little of that mode.
    scenario = Scenario(
        "joined-lanes-sigkill",
        fault=kill_worker,
        outbox={"batch_size": 3},
        inbox={"batch_size": 3},
        load=Load(inbox_chunks=15),
        worker_args=("--join-lanes",),
        worker_env={name: {"LOG_LEVEL": "INFO"} for name in WORKERS},
        log_numbers={
            f"{box} {fact}": pattern.format(box=box)
            for box in (OUTBOX_BOX, INBOX_BOX)
            for fact, pattern in LANE_TURNS.items()
        },
    )
    await guarantees.check(scenario, _lanes_split_and_joined)


async def test_a_consumer_sigkilled_mid_batch(guarantees: Guarantees) -> None:
    await guarantees.check(Scenario("consumer-sigkill", fault=kill_consumer))


async def test_kafka_stopped_then_restarted(guarantees: Guarantees) -> None:
    reason = missing(KAFKA_CONTROL)
    if reason:
        pytest.skip(reason)
    seconds = guarantees.kafka_outage_seconds
    fault = outage(*KAFKA_CONTROL, seconds=seconds, what="Kafka")
    await guarantees.check(Scenario("kafka-outage", fault=fault, drain_within=180.0 + seconds))


async def test_postgresql_restarted_under_load(guarantees: Guarantees) -> None:
    reason = missing(PG_CONTROL)
    if reason:
        pytest.skip(reason)
    fault = outage(*PG_CONTROL, seconds=3.0, what="PostgreSQL")
    await guarantees.check(Scenario("postgres-restart", fault=fault))


async def test_network_to_kafka_dropped_then_lossy(guarantees: Guarantees) -> None:
    sandbox = network_sandbox(guarantees.bootstrap)
    if not isinstance(sandbox, NetworkSandbox):
        pytest.skip(sandbox)
    try:
        await guarantees.check(
            Scenario(
                "kafka-network",
                fault=network_trouble(sandbox, drop_seconds=8.0, lossy_seconds=8.0),
                cgroup=sandbox.cgroup,
                cgroup_members=("worker-0", "consumer-0"),
                drain_within=180.0,
            )
        )
    finally:
        sandbox.remove()


def _retried_every_scripted_item(row: Row) -> list[str]:
    if row.scripted == 0:
        return ["no item got the scripted trouble (nothing was tested)"]
    if row.retried < row.scripted:
        return [f"only {row.retried} items retried, {row.scripted} had a bad first attempt"]
    return []


async def test_a_transport_slower_than_its_timeout(guarantees: Guarantees) -> None:
    scenario = Scenario(
        "slow-transport",
        outbox={
            "transport_timeout_seconds": 0.5,
            "transports": [transport(ScriptedKafkaTransport, slow_every=40, slow_seconds=1.5)],
        },
        scripted_every=40,
    )
    await guarantees.check(scenario, _retried_every_scripted_item)


def _clear_503s(row: Row) -> list[str]:
    if not EXAMPLE_DOMAIN:
        return []
    asked = row.facts.get("api_requests_while_full", 0)
    clear = row.facts.get("api_clear_503", 0)
    if asked == 0 or clear != asked:
        return [f"{clear} of {asked} order requests during the full disk got a clear 503"]
    return []


async def test_disk_full_on_insert(guarantees: Guarantees) -> None:
    await guarantees.check(Scenario("disk-full", fault=disk_full(6.0)), _clear_503s)


async def test_clocks_skewed_an_hour_both_ways(guarantees: Guarantees) -> None:
    ahead, behind = skewed_clock(3600), skewed_clock(-3600)
    if not isinstance(ahead, dict):
        pytest.skip(ahead)
    if not isinstance(behind, dict):
        pytest.skip(behind)
    scenario = Scenario(
        "clock-skew",
        outbox={"transports": [transport(ScriptedKafkaTransport, fail_every=10)]},
        worker_env={"worker-0": ahead, "worker-1": behind},
        scripted_every=10,
        # Backoffs are short (0.5 s, doubling); computed on a skewed clock they would be an
        # hour early or late and the items would sit there.
        drain_within=60.0,
    )
    await guarantees.check(scenario, _retried_every_scripted_item)


# The issue that added the two scenarios below saw double effects with 20,000 inbox messages
# in flight; here 3,000 a second for 12 s, more than the workers handled on the fastest
# 2-core machine seen (20,000 at 2,000 a second was drained between strikes there, the last
# strike landing on an empty inbox; at 3,000 the backlog grew 3,396 -> 6,739), so that the
# backlog grows to thousands while all three terminations land and the consumers store every
# second. A strike that still finds the inbox empty waits for the next chunk (pg_faults.py).
IN_FLIGHT = Load(inbox=36_000, inbox_chunks=12, seconds=12.0)


async def test_a_workers_lock_connection_terminated_by_the_server(
    guarantees: Guarantees,
) -> None:
    scenario = Scenario("lock-conn-killed", fault=lock_connection_killed(), load=IN_FLIGHT)
    struck = landed("lock")
    await guarantees.check(scenario, lambda row: struck(row) + survived(row))


async def test_a_busy_connection_of_a_worker_and_of_a_consumer_terminated(
    guarantees: Guarantees,
) -> None:
    scenario = Scenario(
        "conn-killed",
        fault=connection_killed(("worker-0", "consumer-0")),
        worker_env=labelled((*WORKERS, *CONSUMERS)),
        load=IN_FLIGHT,
    )
    struck = landed("worker", "consumer")
    await guarantees.check(scenario, lambda row: struck(row) + survived(row))
