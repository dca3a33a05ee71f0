"""The raw baseline's claim reads the pending index, whatever its plan was made on.

The bench's ratios are ours over the baseline, so a baseline that falls into a plan trap
inflates every one of them. Until 2026-11-30 it did: with `bucket = b` PostgreSQL costed the
primary key's order lower on a table whose rows were all pending (a drain's start, freshly
analysed), kept that plan while the drain marked rows delivered, and each claim read past
every delivered row (the baseline drained 16k msgs/s where it can 38k). Here, on the real
PostgreSQL: a table of pending rows, analysed; the claim's generic and custom plans, with the
relay's own session settings, are index scans of the pending index only; and after half the
rows are marked delivered with the statistics left stale (as during a drain), a claim of 500
reads about the pages of 500 rows, not those of every delivered one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from typing import Any

import pytest

from conftest import REPO_ROOT, Services

pytestmark = pytest.mark.services

sys.path.insert(0, str(REPO_ROOT / "bench" / "drivers"))
import asyncpg  # noqa: E402
import baseline  # noqa: E402
import common  # noqa: E402

ROWS = 20_000
CLAIM_SIZE = 500


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(n for child in plan.get("Plans", []) for n in _nodes(child))]


async def _explain(conn: asyncpg.Connection, mode: str, analyze: bool) -> dict[str, Any]:
    await conn.execute(f"SET plan_cache_mode = {mode}")
    await conn.execute(f"PREPARE claim_check(int[], int) AS {baseline.CLAIM}")
    try:
        options = "ANALYZE, BUFFERS, FORMAT JSON" if analyze else "FORMAT JSON"
        buckets = ",".join(str(b) for b in range(baseline.BUCKETS))
        text = await conn.fetchval(
            f"EXPLAIN ({options}) EXECUTE claim_check('{{{buckets}}}', {CLAIM_SIZE})"
        )
    finally:
        await conn.execute("DEALLOCATE claim_check")
    result: dict[str, Any] = json.loads(text)[0]
    return result


def _scans(plan: dict[str, Any]) -> list[str]:
    return [
        f"{n['Node Type']} {n.get('Index Name', '')}".strip()
        for n in _nodes(plan)
        if "Scan" in n["Node Type"] and n["Node Type"] != "Function Scan"
    ]


async def _check(url: str) -> dict[str, Any]:
    admin = await asyncpg.connect(url)
    name = f"bench_plan_{uuid.uuid4().hex[:8]}"
    await admin.execute(f"CREATE DATABASE {name}")
    try:
        conn = await asyncpg.connect(
            url.rsplit("/", 1)[0] + f"/{name}",
            server_settings=baseline.RELAY_SETTINGS,
            statement_cache_size=0,
        )
        try:
            await conn.execute(baseline.SCHEMA)
            parser = argparse.ArgumentParser()
            common.common_args(parser)  # the drivers' own defaults: 1,000 keys, 1 KB
            defaults = parser.parse_args([])
            for start in range(0, ROWS, 1000):
                await conn.execute(
                    baseline.INSERT, *baseline._rows(range(start, start + 1000), defaults)
                )
            await conn.execute("VACUUM (ANALYZE) baseline_outbox")
            fresh = {
                m: await _explain(conn, m, False)
                for m in ("force_generic_plan", "force_custom_plan")
            }
            # A drain: half the rows delivered, the lowest ids of every bucket, no ANALYZE since.
            await conn.execute(
                "UPDATE baseline_outbox SET status = 2, processed_at = now() WHERE id <= $1",
                ROWS // 2,
            )
            # The first scan meets the dead entries and marks them; the next claims skip them.
            await _explain(conn, "force_generic_plan", True)
            stale = await _explain(conn, "force_generic_plan", True)
            return {"fresh": fresh, "stale": stale}
        finally:
            await conn.close()
    finally:
        await admin.execute(f"DROP DATABASE {name}")
        await admin.close()


def test_the_claim_reads_only_the_pending_index(services: Services) -> None:
    url = services.database_url.replace("postgresql+asyncpg://", "postgresql://", 1)
    found = asyncio.run(_check(url))
    for mode, explained in found["fresh"].items():
        scans = _scans(explained["Plan"])
        assert scans == ["Index Scan baseline_outbox_pending"], (mode, scans)
    stale = found["stale"]
    assert _scans(stale["Plan"]) == ["Index Scan baseline_outbox_pending"]
    claimed = stale["Plan"]["Actual Rows"]
    assert claimed == CLAIM_SIZE
    buffers = stale["Plan"]["Shared Hit Blocks"] + stale["Plan"].get("Shared Read Blocks", 0)
    # ~1 heap page per claimed row (rows of a bucket are spread) and a few index pages; the
    # primary key's plan read past the 10,000 delivered rows (over 10,000 buffers).
    assert buffers < 3 * CLAIM_SIZE, buffers
