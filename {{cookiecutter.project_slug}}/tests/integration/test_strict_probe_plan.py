"""The strict claim's probe ("an older blocked item of this key?") runs per candidate only
when the table has a row that may block a key at all (store/items.py, ANY_BLOCKING): one
look at the blocked index a claim, whatever the plan cached, and the same items claimed as
with a probe per candidate (docs/performance.md "The claim's plan")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.store.models import blocked_index_name
from outbox_engine.store.status import ItemStatus

from ..support import OUTBOX_BOX, make_registry
from .test_claim_plan import (
    autovacuum_back_on,
    buffers,
    explain_cached_claim,
    generic_plan_processor,
    insert_items,
    plan_on_a_pageless_table,
)


def nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from nodes(child)


def parts(tree: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the InitPlan that looks for any blocking row, the per-candidate probe's SubPlan)."""
    every = list(nodes(tree[0]["Plan"]))
    init = [n for n in every if n.get("Parent Relationship") == "InitPlan"]
    probe = [n for n in every if n.get("Parent Relationship") == "SubPlan"]
    kinds = [n["Node Type"] for n in every]
    assert len(init) == 1, kinds
    assert len(probe) == 1, kinds
    return init[0], probe[0]


def node_buffers(node: dict[str, Any]) -> int:
    return int(node["Shared Hit Blocks"] + node["Shared Read Blocks"])


BUCKET = [7]  # keys 7, 23, 39, 55, 71 and 87: 180 of the 3,000 items below


@pytest.mark.parametrize("statistics", ["none", "left", "one key"])
async def test_the_probe_runs_only_when_a_row_may_block(
    container: Container, statistics: str
) -> None:
    """The claim's plan cached on a pageless table (every path estimated at one row: the
    look for a blocking row could as well read the key index of open items, every pending
    item, to find none; and with the statistics of rows of one key, the claim itself read
    that index whole and sorted it, 5,990 buffers here, until the relay's sessions ruled
    sorts out), then 3,000 pending items in 100 keys over 16 buckets, and claims of bucket
    7 (180 items of 6 keys):

    1. nothing blocks: the look reads the blocked index (a page or two), no probe runs, and
       the claim reads about an index entry and a heap page per item;
    2. the oldest item of key 7 failed for good: every candidate is probed, key 7's later
       items are held back, the other keys' claimed;
    3. that item pending again with a retry already due: the look still finds it (it is in
       the blocked index), the probes run and hold nothing back."""
    box = make_registry().get(OUTBOX_BOX)
    assert box.config.strict_order
    table = box.table_name
    processor = generic_plan_processor(container, box)
    await plan_on_a_pageless_table(container, table, statistics)
    rounds: list[tuple[list[tuple[str, int]], Any]] = []
    try:
        for _ in range(3):
            assert await processor.claim(BUCKET) == []
        async with container.engine().begin() as conn:
            bucket = f"(g % 100) % {box.config.bucket_count}"
            assert await insert_items(conn, table, 3000, bucket=bucket) == 3000
            first_of_7 = (
                await conn.execute(text(f"SELECT min(id) FROM {table} WHERE event_key = '7'"))
            ).scalar_one()
        changes = [
            "",
            f"UPDATE {table} SET status = {int(ItemStatus.FAILED)}, errors_count = 5 "
            f"WHERE id = {first_of_7}",
            f"UPDATE {table} SET status = {int(ItemStatus.PENDING)}, "
            f"next_attempt_at = now() - interval '1 second' WHERE id = {first_of_7}",
        ]
        for change in changes:
            if change:
                async with container.engine().begin() as conn:
                    assert (await conn.execute(text(change))).rowcount == 1
            claimed = [(item.event_key, item.id) for item, _ in await processor.claim(BUCKET)]
            _generic, tree = await explain_cached_claim(processor, BUCKET, "ANALYZE, BUFFERS")
            rounds.append((claimed, tree))
    finally:
        await processor.close()
        await autovacuum_back_on(container, table)

    blocked_index = blocked_index_name(table)
    for _claimed, tree in rounds:
        assert tree[0]["Plan"]["Actual Rows"] == 64  # the explained claim: 64 a bucket
        init, _probe = parts(tree)
        assert init["Index Name"] == blocked_index, init
        assert init["Actual Loops"] == 1  # once a claim, not once a bucket or a candidate
        assert node_buffers(init) <= 3, init

    # 1. Nothing blocks: all 180 claimed, no probe ran; an index entry and a heap page per
    #    item (with a probe each, 3 buffers an item or more).
    claimed, tree = rounds[0]
    _init, probe = parts(tree)
    assert len(claimed) == 180
    assert probe["Actual Loops"] == 0, probe
    assert buffers(tree) <= 2 * 64 + 10, buffers(tree)

    # 2. The oldest item of key 7 failed: each candidate probed, key 7's other 29 held back.
    claimed, tree = rounds[1]
    _init, probe = parts(tree)
    assert len(claimed) == 150
    assert {key for key, _ in claimed} == {"23", "39", "55", "71", "87"}
    assert probe["Actual Loops"] >= 64, probe

    # 3. Its retry is due: it heads its key again, probed and not held back.
    claimed, tree = rounds[2]
    _init, probe = parts(tree)
    assert len(claimed) == 180
    assert ("7", first_of_7) in claimed
    assert probe["Actual Loops"] >= 64, probe
