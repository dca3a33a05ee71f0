"""The operator CLI against real PostgreSQL: stats, retry, discard, replay, purge, pause,
resume, and bad input that must be refused with a clear message and change nothing."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.store.pauses import list_pauses
from outbox_engine.store.status import ItemStatus

from ..ops_support import Spec, run_cli, seed, snapshot, states
from ..support import OUTBOX_BOX, service_env

PENDING, FAILED, DELIVERED, DISCARDED, PARKED = (
    ItemStatus.PENDING,
    ItemStatus.FAILED,
    ItemStatus.DELIVERED,
    ItemStatus.DISCARDED,
    ItemStatus.PARKED,
)


def cli(container: Container, *args: str) -> str:
    result = run_cli(*args, env=service_env(container))
    assert result.returncode == 0, result.stderr
    return result.stdout


def refused(container: Container, *args: str) -> str:
    result = run_cli(*args, env=service_env(container))
    assert result.returncode == 2, (result.stdout, result.stderr)
    return result.stderr


async def test_stats_reports_depths_lag_hot_spots_and_errors(container: Container) -> None:
    await seed(
        container,
        [Spec("7") for _ in range(4)]
        + [Spec("8", age=timedelta(minutes=5)), Spec("9", waiting=True, errors=2, last_error="E1")]
        + [Spec("1", "invoice_paid", FAILED, 11, "Boom: broker said no")] * 3
        + [Spec("2", "invoice_sent", FAILED, 11, "Other: nope")]
        + [Spec("3", status=DELIVERED)] * 5
        + [Spec("4", status=DISCARDED), Spec("5", "invoice_paid", PARKED, 11, "Parked: poison")],
    )
    cli(container, "pause", "--box", OUTBOX_BOX, "--key", "7", "--reason", "hot key")
    stats = json.loads(cli(container, "stats", "--json", "--box", OUTBOX_BOX, "--top", "2"))
    assert len(stats) == 1
    box = stats[0]
    assert box["box"] == OUTBOX_BOX
    assert box["counts"] == {
        "pending": 6,
        "failed": 4,
        "delivered": 5,
        "discarded": 1,
        "parked": 1,
    }
    assert box["pending_waiting"] == 1
    assert box["pending_due"] == 5
    assert 299 < box["oldest_pending_age_seconds"] < 400
    assert box["deepest_keys"][0] == {"key": "7", "pending": 4}
    assert len(box["deepest_keys"]) == 2
    assert box["deepest_buckets"][0]["pending"] >= 4
    assert box["failing"][0] == {
        "event_name": "invoice_paid",
        "failed": 3,
        "retrying": 0,
        "last_error": "Boom: broker said no",
    }
    assert box["paused"] == [f"key '7' of box {OUTBOX_BOX}"]
    text = cli(container, "stats")
    assert f"outbox {OUTBOX_BOX}" in text
    assert "pending 6  failed 4  delivered 5  discarded 1  parked 1" in text
    assert "failing invoice_paid: 3 failed, 0 retrying; last: Boom: broker said no" in text
    assert "PAUSED: key '7' of box" in text


async def test_retry_with_dry_run_then_for_real(container: Container) -> None:
    ids = await seed(
        container,
        [Spec("1", "a", FAILED, 6, "x")] * 3
        + [Spec("2", "b", FAILED, 6, "y")] * 2
        + [
            Spec("3", "a", DELIVERED),
            Spec("4", "a", DISCARDED),
            Spec("5", "a", waiting=True, errors=1),
        ],
    )
    before = await snapshot(container)
    out = cli(container, "retry", "--box", OUTBOX_BOX, "--event", "a", "--dry-run")
    assert out.strip() == f"dry run: retry would change 3 items of box {OUTBOX_BOX}"
    assert await snapshot(container) == before

    out = cli(container, "retry", "--yes", "--box", OUTBOX_BOX, "--event", "a")
    assert out.strip() == f"retry: changed 3 items of box {OUTBOX_BOX}"
    now = await states(container)
    assert [now[i] for i in ids[:3]] == [("pending", 0)] * 3
    assert [now[i] for i in ids[3:5]] == [("failed", 6)] * 2  # other event: untouched
    assert now[ids[5]] == ("delivered", 0)
    assert now[ids[6]] == ("discarded", 0)  # default is failed items only

    # By id: discarded and waiting items too, each due now with attempts reset.
    cli(container, "retry", "--yes", "--box", OUTBOX_BOX, "--id", str(ids[6]), "--id", str(ids[7]))
    now = await states(container)
    assert now[ids[6]] == ("pending", 0)
    assert now[ids[7]] == ("pending", 0)
    rows = {row[0]: row for row in await snapshot(container)}
    assert rows[ids[7]][4] is None  # next_attempt_at cleared
    # By key and status.
    assert "changed 2 items" in cli(
        container, "retry", "--yes", "--box", OUTBOX_BOX, "--key", "2", "--status", "failed"
    )
    assert (await states(container))[ids[3]] == ("pending", 0)


async def test_retry_refuses_delivered_items_and_points_to_replay(container: Container) -> None:
    await seed(container, [Spec("1", status=DELIVERED)])
    before = await snapshot(container)
    error = refused(container, "retry", "--box", OUTBOX_BOX, "--status", "delivered")
    assert "retry applies to failed, discarded, pending, parked items, not delivered" in error
    assert "replay" in error
    assert await snapshot(container) == before


async def test_discard_by_key_and_by_id(container: Container) -> None:
    ids = await seed(
        container,
        [
            Spec("k1", status=FAILED, errors=3),
            Spec("k1", status=FAILED),
            Spec("k1", status=DELIVERED),
            Spec("k2"),
            Spec("k2", status=FAILED),
        ],
    )
    assert "would change 2 items" in cli(
        container, "discard", "--box", OUTBOX_BOX, "--key", "k1", "--dry-run"
    )
    assert "changed 2 items" in cli(
        container, "discard", "--yes", "--box", OUTBOX_BOX, "--key", "k1"
    )
    # A pending item is discarded only when named.
    assert "changed 1 items" in cli(
        container, "discard", "--yes", "--box", OUTBOX_BOX, "--id", str(ids[3]), "--id", str(ids[2])
    )
    now = await states(container)
    assert [now[i][0] for i in ids] == [
        "discarded",
        "discarded",
        "delivered",
        "discarded",
        "failed",
    ]
    rows = {row[0]: row for row in await snapshot(container)}
    assert rows[ids[0]][5] is not None  # processed_at set


async def test_replay_by_id_range_time_range_and_key(container: Container) -> None:
    ids = await seed(
        container,
        [Spec("1", status=DELIVERED, age=timedelta(hours=3)) for _ in range(3)]
        + [Spec("2", status=DELIVERED, age=timedelta(hours=1)) for _ in range(3)]
        + [Spec("3", status=DELIVERED), Spec("3", status=FAILED, errors=2)],
    )
    error = refused(container, "replay", "--box", OUTBOX_BOX)
    assert "replay needs a selection" in error

    rng = f"{ids[0]}:{ids[1]}"
    assert "would change 2 items" in cli(
        container, "replay", "--box", OUTBOX_BOX, "--id-range", rng, "--dry-run"
    )
    assert "changed 2 items" in cli(
        container, "replay", "--yes", "--box", OUTBOX_BOX, "--id-range", rng
    )
    now = datetime.now(UTC)
    since = (now - timedelta(hours=2)).isoformat()
    until = (now - timedelta(minutes=30)).isoformat()
    assert "changed 3 items" in cli(
        container, "replay", "--yes", "--box", OUTBOX_BOX, "--since", since, "--until", until
    )
    # A key: only its delivered items, never its failed one.
    assert "changed 1 items" in cli(container, "replay", "--yes", "--box", OUTBOX_BOX, "--key", "3")
    states_now = await states(container)
    assert [states_now[i][0] for i in ids] == ["pending"] * 2 + ["delivered"] + ["pending"] * 4 + [
        "failed"
    ]


async def test_purge_deletes_what_retention_allows_and_never_pending(container: Container) -> None:
    old = timedelta(days=30)
    await seed(
        container,
        [Spec("1", status=DELIVERED, age=old)] * 3
        + [Spec("2", status=FAILED, age=old), Spec("2", status=DISCARDED, age=old)]
        + [Spec("2", status=PARKED, age=old), Spec("2", status=PARKED)]
        + [Spec("3", age=old), Spec("4", status=DELIVERED)],
    )
    out = cli(container, "purge", "--yes", "--box", OUTBOX_BOX)
    assert out.strip() == (
        f"purge {OUTBOX_BOX}: deleted 3 delivered and 3 failed/discarded/parked items"
    )
    assert sorted(s for s, _ in (await states(container)).values()) == [
        "delivered",
        "parked",
        "pending",
    ]


async def test_pause_resume_and_list(container: Container) -> None:
    assert cli(container, "pauses").strip() == "nothing is paused"
    assert (
        cli(container, "pause", "--box", OUTBOX_BOX, "--reason", "deploy").strip()
        == f"paused box {OUTBOX_BOX}"
    )
    assert "was already paused" in cli(container, "pause", "--box", OUTBOX_BOX)
    cli(container, "pause", "--box", OUTBOX_BOX, "--bucket", "2")
    cli(container, "pause", "--box", OUTBOX_BOX, "--key", "k'1")
    listed = cli(container, "pauses", "--box", OUTBOX_BOX).splitlines()
    assert [line.split("\t")[0] for line in listed] == [
        f"box {OUTBOX_BOX}",
        f"bucket 2 of box {OUTBOX_BOX}",
        f'key "k\'1" of box {OUTBOX_BOX}',
    ]
    assert listed[0].endswith("\tdeploy")
    assert "(1 pauses lifted)" in cli(container, "resume", "--box", OUTBOX_BOX, "--bucket", "2")
    assert "was not paused" in cli(container, "resume", "--box", OUTBOX_BOX, "--bucket", "2")
    assert "(2 pauses lifted)" in cli(container, "resume", "--box", OUTBOX_BOX, "--all")
    assert await list_pauses(container.engine()) == []


BAD_INPUT = [
    (("retry", "--box", "nope"), "unknown box 'nope'; configured boxes: "),
    (("retry", "--box", OUTBOX_BOX, "--id", "12abc"), "malformed item id '12abc'"),
    (("retry", "--box", OUTBOX_BOX, "--id", "-3"), "malformed item id '-3'"),
    (("discard", "--box", OUTBOX_BOX, "--id", "1; DELETE FROM x"), "malformed item id"),
    (("retry", "--box", OUTBOX_BOX, "--status", "stuck"), "unknown status 'stuck'"),
    (("retry", "--box", OUTBOX_BOX, "--since", "yesterday"), "malformed time 'yesterday'"),
    (("replay", "--box", OUTBOX_BOX, "--id-range", "9:3"), "is empty: 9 > 3"),
    (("replay", "--box", OUTBOX_BOX, "--id-range", "1-3"), "malformed id range '1-3'"),
    (
        ("discard", "--box", OUTBOX_BOX, "--status", "delivered"),
        "discard applies to failed, pending",
    ),
    (("pause", "--box", OUTBOX_BOX, "--bucket", "99999"), "has buckets 0-"),
    (("pause", "--box", "nope; drop table x"), "unknown box 'nope; drop table x'"),
    (("stats", "--box", "nope"), "unknown box 'nope'"),
    (("purge", "--box", "nope"), "unknown box 'nope'"),
]


async def test_bad_input_is_refused_and_changes_nothing(container: Container) -> None:
    await seed(container, [Spec("1", status=FAILED), Spec("2", status=DELIVERED), Spec("3")])
    before = await snapshot(container)
    env = service_env(container)
    # Independent processes: run them side by side (each spends seconds importing).
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda case: run_cli(*case[0], env=env), BAD_INPUT))
    for (args, message), result in zip(BAD_INPUT, results, strict=True):
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
    assert await snapshot(container) == before
    assert await list_pauses(container.engine()) == []


async def test_sql_metacharacters_in_filters_are_plain_values(container: Container) -> None:
    hostile = "x'; DROP TABLE outbox_pauses; --"
    await seed(container, [Spec(hostile, status=FAILED), Spec("other", status=FAILED)])
    assert "changed 1 items" in cli(
        container, "retry", "--yes", "--box", OUTBOX_BOX, "--key", hostile
    )
    assert "changed 0 items" in cli(
        container, "discard", "--yes", "--box", OUTBOX_BOX, "--event", "' OR 1=1 --"
    )
    cli(container, "pause", "--box", OUTBOX_BOX, "--key", hostile)
    assert [p.event_key for p in await list_pauses(container.engine())] == [hostile]
    assert sorted(s for s, _ in (await states(container)).values()) == ["failed", "pending"]
