"""Parking the poisoned head of a key in a strict box, on real PostgreSQL and Kafka: a failed
head holds back its key's later items; `park` releases them (counted on the topic); the
parked item stays parked until retried (then delivered after its key's later items) or
purged after the `failed` retention period."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from sqlalchemy import text

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.store.status import ItemStatus

from ..ops_support import TABLE, Spec, run_cli, seed, states
from ..support import OUTBOX_BOX, make_registry, read_topic, running_worker, service_env, wait_for


def cli(container: Container, *args: str) -> str:
    result = run_cli(*args, env=service_env(container))
    assert result.returncode == 0, result.stderr
    return result.stdout


async def count(container: Container, status: ItemStatus) -> int:
    async with container.engine().connect() as conn:
        found = await conn.execute(
            text(f"SELECT count(*) FROM {TABLE} WHERE status = :s"), {"s": int(status)}
        )
        return int(found.scalar_one())


async def test_park_releases_a_blocked_key_and_the_parked_head_waits_aside(
    container: Container, env_topics: str
) -> None:
    bootstrap = container.settings().kafka_bootstrap_servers
    registry = make_registry(outbox={"strict_order": True, "poisoned_head": "block"})
    box = registry.get(OUTBOX_BOX)
    # Key A and key B each have a head that failed for good and two later items; key C has
    # nothing wrong with it.
    ids = await seed(
        container,
        [
            Spec("A", status=ItemStatus.FAILED, errors=11, last_error="poison"),
            Spec("B", status=ItemStatus.FAILED, errors=11, last_error="poison"),
            Spec("A"),
            Spec("B"),
            Spec("C"),
            Spec("A"),
            Spec("B"),
        ],
    )
    head_a, head_b = ids[0], ids[1]

    async with running_worker(container, registry):
        await wait_for(lambda: _delivered(container, 1), within=20)
        await asyncio.sleep(box.config.poll_interval * 3)  # the blocked keys had their chances
        assert await count(container, ItemStatus.DELIVERED) == 1
        assert await count(container, ItemStatus.PENDING) == 4
        assert [m.key for m in read_topic(bootstrap, env_topics, expect=1, settle=1.0)] == ["C"]

        # Park A's head by key, B's by id: the key moves on, in order.
        out = cli(container, "park", "--yes", "--box", OUTBOX_BOX, "--key", "A")
        assert out.strip() == f"park: changed 1 items of box {OUTBOX_BOX}"
        cli(container, "park", "--yes", "--box", OUTBOX_BOX, "--id", str(head_b))
        await wait_for(lambda: _delivered(container, 5), within=20)

        received = read_topic(bootstrap, env_topics, expect=5, settle=1.0)
        assert len(received) == 5
        per_key = {k: [m.headers["message-id"] for m in received if m.key == k] for k in "ABC"}
        uuids = await _uuids(container)
        assert per_key == {
            "A": [uuids[ids[2]], uuids[ids[5]]],
            "B": [uuids[ids[3]], uuids[ids[6]]],
            "C": [uuids[ids[4]]],
        }
        assert (await states(container))[head_a] == ("parked", 11)

        # B's parked head goes back with `retry`: delivered after the later items of B.
        assert "changed 1 items" in cli(
            container, "retry", "--yes", "--box", OUTBOX_BOX, "--status", "parked", "--key", "B"
        )
        await wait_for(lambda: _delivered(container, 6), within=20)
        received = read_topic(bootstrap, env_topics, expect=6, settle=1.0)
        assert [m.headers["message-id"] for m in received if m.key == "B"] == [
            uuids[ids[3]],
            uuids[ids[6]],
            uuids[head_b],
        ]
        await asyncio.sleep(box.config.poll_interval * 2)
        assert (await states(container))[head_a] == ("parked", 11)  # untouched by the relay

    # Parked items are purged after the `failed` period (14 days here), like failed ones.
    assert box.config.retention.failed == timedelta(days=14)
    await _age(container, head_a, timedelta(days=13))
    assert "deleted 0 delivered and 0 failed/discarded/parked items" in cli(
        container, "purge", "--yes", "--box", OUTBOX_BOX
    )
    await _age(container, head_a, timedelta(days=15))
    assert "deleted 0 delivered and 1 failed/discarded/parked items" in cli(
        container, "purge", "--yes", "--box", OUTBOX_BOX
    )
    assert head_a not in await states(container)
    assert await count(container, ItemStatus.DELIVERED) == 6


async def _delivered(container: Container, expected: int) -> bool:
    return await count(container, ItemStatus.DELIVERED) == expected


async def _uuids(container: Container) -> dict[int, str]:
    async with container.engine().connect() as conn:
        rows = await conn.execute(text(f"SELECT id, uuid FROM {TABLE}"))
        return {r[0]: str(r[1]) for r in rows}


async def _age(container: Container, item_id: int, age: timedelta) -> None:
    async with container.engine().begin() as conn:
        await conn.execute(
            text(
                f"UPDATE {TABLE} SET created_at = now() - make_interval(secs => :s) WHERE id = :id"
            ),
            {"s": age.total_seconds(), "id": item_id},
        )
