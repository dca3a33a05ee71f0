"""The benchmark harness runs end to end in its quick mode, finds nothing wrong, and follows
its method.

`./bench/run.sh --quick --repeats 2 --seed 7 --docs` bakes the default project, installs it,
and runs every scenario at small sizes for it and the raw baseline on the real services:
nothing lost, no per-key order violations, no inbox row stored twice. It asserts nothing
about speed, but it does check how the numbers were taken: the order of the systems differs
between the repeats and is the one the seed gives (so `--seed` replays it), every timed run
was preceded by a VACUUM (ANALYZE) and a CHECKPOINT that PostgreSQL confirms, and the report
and the results files show every repeat's value and ratio ours / baseline with its spread.
About nine minutes here (two repeats of every scenario); deselect with `-k "not bench_quick"`
(or TEMPLATE_SKIP_BENCH=1).
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT, Services, clean_env, load_bench_module, run, tail

pytestmark = [pytest.mark.bake, pytest.mark.services]

SEED = 7
REPEATS = 2
SYSTEMS = ["ours", "baseline"]
# Quick sizes: drain with 1 and 2 workers (two rounds each), steady at one rate (two
# rounds), inbox (two rounds), create cost, idle cost, table growth (0 and 20k delivered rows, 20k
# purging), memory (a 20k backlog); and for ours alone the many-workers scenario (3 workers
# joining, then leaving) and the mixed load (api, relay and inbox at once).
RUNS_PER_SYSTEM_AND_REPEAT = 14
# The drains (1 and 2 workers), the steady runs and the inbox ingests of ours and the
# baseline run in rounds, the median kept (bench/rounds.py): two at quick sizes.
DRAIN_ROUNDS = 2
STEADY_ROUNDS = 2
INBOX_ROUNDS = 2
OURS_ALONE_PER_REPEAT = 2
GROWTH_CASES = ["0", "20k", "20k purging"]
SCALE_WORKERS = 3


def test_system_order_rotates_per_repeat_and_replays_from_its_seed() -> None:
    order = load_bench_module("order")
    names = ["ours", "faststream-outbox", "omni-box", "baseline"]
    orders = order.repeat_orders(names, 8, 1234)
    assert orders == order.repeat_orders(names, 8, 1234)  # the seed replays the run
    for first, second in itertools.pairwise(orders):
        assert first != second
    # In every 4 consecutive repeats each system runs once in each position.
    for position in range(4):
        assert sorted(o[position] for o in orders[:4]) == sorted(names)
        assert [o[position] for o in orders[:4]] == [o[position] for o in orders[4:]]
    # The seed decides the order: 20 seeds give more than one first order.
    firsts = {tuple(order.repeat_orders(names, 1, seed)[0]) for seed in range(20)}
    assert len(firsts) > 1
    assert (
        order.repeat_orders(["ours", "baseline"], 3, 5)[0]
        != order.repeat_orders(["ours", "baseline"], 3, 5)[1]
    )
    with pytest.raises(ValueError, match="distinct"):
        order.repeat_orders(["ours", "ours"], 2, 1)


@pytest.mark.skipif(os.environ.get("TEMPLATE_SKIP_BENCH") == "1", reason="TEMPLATE_SKIP_BENCH=1")
def test_bench_quick_is_correct(services: Services, tmp_path: Path) -> None:
    out = tmp_path / "docs"
    result = run(
        [
            REPO_ROOT / "bench" / "run.sh",
            "--quick",
            "--repeats",
            str(REPEATS),
            "--seed",
            str(SEED),
            "--docs",
            "--out",
            out,
        ],
        cwd=REPO_ROOT,
        env=clean_env(
            TEST_DATABASE_URL=services.database_url,
            TEST_KAFKA_BOOTSTRAP_SERVERS=services.kafka_bootstrap_servers,
        ),
        timeout=1200,
        check=False,
    )
    log = result.stdout
    assert result.returncode == 0, tail(log, 80)
    assert "quick run: correct" in log, tail(log, 80)
    scenarios = (
        "drain ours w1",
        "drain ours w2",
        "steady ours",
        "inbox ours",
        "cost ours",
        "idle ours",
        "idle baseline",
        "growth ours 20k purging",
        "growth baseline 20k purging",
        "memory ours 20,000",
        "memory baseline 20,000",
    )
    for scenario in (*scenarios, "scale ours", "mixed ours"):
        assert f"[bench] {scenario}" in log, tail(log, 80)
    assert f"[bench] seed {SEED} " in log, tail(log, 80)
    # Before the first timed run: 3 s of paced messages through the broker, all read back.
    assert "[bench] broker warmed up: 1500/1500 messages in 3s" in log, tail(log, 80)
    # And before it, in bulk: rounds of 5,000 messages at full speed, each read back whole.
    assert "[bench] broker warmed up in bulk: " in log, tail(log, 80)

    # The order: the seed's, different in each repeat, and the runs followed it.
    expected = load_bench_module("order").repeat_orders(SYSTEMS, REPEATS, SEED)
    assert expected[0] != expected[1]
    doc = json.loads((out / "benchmarks-results.json").read_text())
    assert doc["seed"] == SEED
    assert doc["orders"] == expected
    warmup = doc["broker_warmup"]
    assert (warmup["sent"], warmup["seen"], warmup["complete"]) == (1500, 1500, True), warmup
    assert warmup["p50_first_second_ms"] > 0, warmup
    assert warmup["p50_last_second_ms"] > 0, warmup
    bulk = warmup["bulk"]
    assert bulk["per_round"] == 5000, bulk
    assert 1 <= len(bulk["rounds"]) <= 2, bulk
    for round_ in bulk["rounds"]:
        assert (round_["seen"], round_["undelivered"], round_["complete"]) == (5000, 0, True)
        assert round_["broker_us_per_msg"] > 0, bulk
    for repeat, names in enumerate(expected):
        assert f"repeat {repeat + 1}/{REPEATS}: order {', '.join(names)} (seed {SEED})" in log
        drained = re.findall(
            r"\[bench\] drain (\w+) w1 round (\d)/2:",
            log.split(f"repeat {repeat + 1}/{REPEATS}:")[1].split("[bench] repeat ")[0],
        )
        # Round 1 in the repeat's order, round 2 in reverse (A B B A).
        assert drained == [(n, "1") for n in names] + [(n, "2") for n in names[::-1]], drained
    for rows in doc["runs"].values():
        for r in rows:
            assert r["system"] == expected[r["repeat"]][r["position"]], r

    # Every timed run settled first, as PostgreSQL saw it.
    timed = REPEATS * (len(SYSTEMS) * RUNS_PER_SYSTEM_AND_REPEAT + OURS_ALONE_PER_REPEAT)
    assert doc["settle_counts"]["timed_runs"] == timed, doc["settle_counts"]
    assert doc["settle_counts"]["checkpoints"] == timed, doc["settle_counts"]
    assert doc["settle_counts"]["vacuum_analyze"] == timed, doc["settle_counts"]
    with (out / "benchmarks-results.csv").open() as handle:
        table = list(csv.DictReader(handle))
    assert len(table) == timed
    for row in table:
        assert row["checkpoint"] == "1", row
        assert row["vacuum_analyze"] == "1", row
        assert float(row["load1"]) >= 0, row
        # The quiet test (bench/settle.py): the CPU's activity over the window before the
        # start, quiet below 10%; with --quiet-wait 0 one window is measured, not waited on.
        active = float(row["cpu_active_pct"])
        assert 0.0 <= active <= 100.0, row
        assert row["quiet"] == str(active < 10.0), row
        assert 2.0 <= float(row["quiet_wait_s"]) < 3.0, row
    quiet = sum(row["quiet"] == "True" for row in table)
    assert doc["settle_counts"]["quiet_at_start"] == quiet, doc["settle_counts"]
    assert f"{quiet} of {timed} runs started quiet (below 10% active)" in doc["load_note"]
    # The host's speed was sampled through every timed run (bench/host.py): a share where the
    # run lasted 2 s or more, the same in the CSV, and its median in the Machine lines.
    shares = []
    for rows in doc["runs"].values():
        for r in (one for kept in rows for one in [kept, *kept.get("other_rounds", [])]):
            during = r["settle"]["host_during"]
            assert during["fast_us"] > 0, r["settle"]
            if during["units"] >= 20:
                assert 0.0 <= during["slow_share"] <= 1.0, r["settle"]
                shares.append(during["slow_share"])
            else:
                assert during["slow_share"] is None, r["settle"]
    assert len(shares) >= timed // 2, shares
    assert sum(1 for row in table if row["host_slow_share"]) == len(shares)
    host_line = next(m for m in doc["machine"] if m.startswith("Host cores in the slow mode"))
    assert f"{len(shares)} runs; a fast unit" in host_line, host_line

    # Every repeat's ratio ours / baseline, in the JSON, the CSV and the report.
    report = (out / "benchmarks.md").read_text()
    assert "## 10. Every repeat" in report
    # Its profile section is bench/notes.md as report.py writes it, which is what
    # `python -m bench.notes_sync` keeps in step after a run.
    notes_sync = load_bench_module("notes_sync")
    notes = (REPO_ROOT / "bench" / "notes.md").read_text()
    start, end = notes_sync.section_span(report)
    assert report[start:end] == notes_sync.body(notes)
    assert notes_sync.synced(report, notes) == report
    # The report names the broker's warm-up: each bulk round's cost, then the paced phase.
    costs = " / ".join(f"{r['broker_us_per_msg']:.1f}" for r in bulk["rounds"])
    assert (
        f"- Kafka broker warmed up before the first timed run (untimed): "
        f"{len(bulk['rounds'])} rounds of 5,000 ~1 KB messages at full speed, each read back, "
        f"the broker's CPU a message {costs} µs"
    ) in report, report[:3000]
    assert "; then 3 s of paced single messages, 1,500 of 1,500 read back" in report
    assert f"replay the order with `--seed {SEED}`" in report
    # The command that makes this run's method again, in the report and the JSON.
    command = f"./bench/run.sh --quick --repeats {REPEATS} --seed {SEED} --quiet-wait 0"
    assert doc["command"] == command
    assert f"Command: `{command}`" in report
    # The last run's results.json says the same of its run (bench.compare prints it).
    last = re.search(r"\[bench\] results: (\S+results\.json) ", log)
    assert last is not None, tail(log, 80)
    last_doc = json.loads(Path(last.group(1)).read_text())
    for key in ("started", "command", "machine", "load_note", "settle_note", "broker_warmup"):
        assert last_doc[key] == doc[key], key
    drain_w1 = [r for r in doc["per_repeat"] if r["scenario"] == "drain" and r["case"] == "w1"]
    assert [r["repeat"] for r in drain_w1] == list(range(REPEATS))
    ratios = []
    for r in drain_w1:
        runs = {
            x["system"]: x["rate"]
            for x in doc["runs"]["drain"]
            if x["repeat"] == r["repeat"] and x["workers"] == 1
        }
        ratio = runs["ours"] / runs["baseline"]
        assert r["ratios"]["baseline"] == pytest.approx(ratio)
        csv_ours = next(
            row
            for row in table
            if row["scenario"] == "drain"
            and row["case"] == "w1"
            and row["repeat"] == str(r["repeat"])
            and row["system"] == "ours"
            and row["kept"] == "True"
        )
        # The CSV rounds to 4 decimals: half a unit of the last one either way.
        assert float(csv_ours["vs_baseline"]) == pytest.approx(ratio, rel=1e-3, abs=5.1e-5)
        line = next(
            line for line in report.splitlines() if line.startswith(f"| w1 | {r['repeat'] + 1} |")
        )
        assert line.rstrip(" |").endswith(f"{ratio:.2f}x"), line
        ratios.append(ratio)
    spread = next(
        s
        for s in doc["spreads"]
        if s["scenario"] == "drain" and s["case"] == "w1" and s["vs"] == "baseline"
    )
    assert spread["min"] == pytest.approx(min(ratios))
    assert spread["max"] == pytest.approx(max(ratios))
    assert spread["n"] == REPEATS
    assert f"| drain | w1 | ours / baseline | {min(ratios):.2f}x |" in report

    # Rounds: each kept drain of ours and the baseline is the lower of its two rounds, both
    # listed (with the host's share) and the other whole beside it; the CSV has a row per
    # round, one kept; the report lists every round, the kept one in bold.
    for r in doc["runs"]["drain"]:
        made = r["rounds"]
        assert [x["round"] for x in made] == list(range(DRAIN_ROUNDS)), r
        assert r["rate"] == min(x["rate"] for x in made), made
        assert [x["kept"] for x in made].count(True) == 1, made
        assert made[r["round"]]["kept"], made
        (other,) = r["other_rounds"]
        assert other["rate"] == max(x["rate"] for x in made), made
        assert (other["system"], other["workers"], other["repeat"]) == (
            r["system"],
            r["workers"],
            r["repeat"],
        )
        rows = [
            row
            for row in table
            if row["scenario"] == "drain"
            and row["case"] == f"w{r['workers']}"
            and row["repeat"] == str(r["repeat"])
            and row["system"] == r["system"]
        ]
        assert sorted((row["round"], row["kept"]) for row in rows) == [
            (str(i), str(made[i]["kept"])) for i in range(DRAIN_ROUNDS)
        ], rows
    ours_w1 = sorted(
        (r for r in doc["runs"]["drain"] if r["system"] == "ours" and r["workers"] == 1),
        key=lambda r: r["repeat"],
    )
    assert f"- ours, 1 worker(s): {_listed(ours_w1, 'rate', ',.0f')}" in report, report

    # The steady runs in rounds too: of two, the kept one is the lower p99 (the median of an
    # even number is its lower middle), every round delivered everything in order, the
    # CSV has a row per round, and the report lists every round's p99, the kept one in bold.
    steadies = doc["runs"]["steady"]
    assert sorted((r["system"], r["repeat"]) for r in steadies) == sorted(
        (s, rep) for s in SYSTEMS for rep in range(REPEATS)
    )
    for r in steadies:
        made = r["rounds"]
        assert [x["round"] for x in made] == list(range(STEADY_ROUNDS)), r["rounds"]
        assert r["p99"] == min(x["p99"] for x in made), made
        (other,) = r["other_rounds"]
        assert "latencies" not in r, sorted(r)
        assert "latencies" not in other, sorted(other)
        for one in (r, other):
            assert (one["undelivered"], one["order_violations"]) == (0, 0), one
            # Every delivered item carries its producer's timestamp, and its part before the
            # produce call is shorter than its whole latency (the timestamp is truncated to
            # the millisecond, never later than the call), so the parts' percentiles are
            # bounded by the whole's; the part after it is positive.
            cut = one["produce_split"]
            assert cut["items"] == one["items"], (cut, one["items"])
            assert cut["to_produce_p50"] <= one["p50"], (cut, one["p50"])
            assert cut["to_produce_p99"] <= one["p99"], (cut, one["p99"])
            assert 0 < cut["after_produce_p50"] <= cut["after_produce_p99"], cut
        rows = [
            row
            for row in table
            if row["scenario"] == "steady"
            and row["repeat"] == str(r["repeat"])
            and row["system"] == r["system"]
        ]
        assert sorted(row["kept"] for row in rows) == ["False", "True"], rows
    for system in SYSTEMS:
        mine = sorted((r for r in steadies if r["system"] == system), key=lambda r: r["repeat"])
        listed = _listed(mine, "p99", ".1f")
        assert f"- {system}, {mine[0]['rate']:,}/s: {listed}" in report, report
        cuts = [
            " / ".join(f"{r['produce_split'][key]:.1f}" for r in mine)
            for key in ("to_produce_p50", "to_produce_p99")
        ]
        assert f"| {system} | {mine[0]['rate']:,} | {cuts[0]} | {cuts[1]} |" in report, report

    # The inbox ingests in rounds: of two, the kept one is the lower rate; both stored every
    # distinct message once, each with a consumer group of its own (it read the topic from
    # its start), and the report lists every round's rate, the kept one in bold.
    inboxes = doc["runs"]["inbox"]
    assert sorted((r["system"], r["repeat"]) for r in inboxes) == sorted(
        (s, rep) for s in SYSTEMS for rep in range(REPEATS)
    )
    for r in inboxes:
        made = r["rounds"]
        assert [x["round"] for x in made] == list(range(INBOX_ROUNDS)), made
        assert r["rate"] == min(x["rate"] for x in made), made
        (other,) = r["other_rounds"]
        for one in (r, other):
            assert (one["stored"], one["lost"], one["stored_duplicates"]) == (4500, 0, 0), one
            assert one["problems"] == [], one
    for system in SYSTEMS:
        mine = sorted((r for r in inboxes if r["system"] == system), key=lambda r: r["repeat"])
        assert f"- {system}: {_listed(mine, 'rate', ',.0f')}" in report, report

    # Relay CPU per message (bench/procs.py's reading is tested on its own below): at quick
    # sizes a drain can be too short to measure (the baseline sends 5,000 messages in tens
    # of milliseconds), so a one-process run has a plausible figure (a message costs more
    # than 1 us and less than 10 ms of CPU) or none; a two-process run never has one. Peak
    # RSS is always read. The drain table shows both, the targets table the CPU figures.
    for r in doc["runs"]["drain"]:
        cpu = r["cpu_us_per_msg"]
        if r["workers"] == 1:
            assert cpu is None or 1 < cpu < 10_000, r
        else:
            assert cpu is None, r
        assert 10 < r["rss_mb_peak"] < 1000, r
        # The machine's CPU in the same window (bench/cpu_split.py): none when the window
        # is too short, else shares that add up; the relay's share is the figure above. A
        # window long enough for the relay's figure is long enough for PostgreSQL's and the
        # broker's to show (each spends several µs a message).
        machine = r["machine_cpu"]
        if machine is None:
            continue
        assert 0 < machine["busy_pct"] <= 100, r
        parts = [machine[k] for k in ("postgres", "kafka", "harness", "other")]
        assert all(part >= 0 for part in parts), r
        assert (machine["relays"] is None) is (cpu is None), r
        if cpu is not None:
            assert machine["relays"] == pytest.approx(cpu), r
            assert machine["postgres"] > 0, r
            assert machine["kafka"] > 0, r
    assert "| relay CPU µs/msg | relay RSS peak MiB |" in report
    # The split's table (its rendering is tested on its own) when some drain was split:
    # at quick sizes most are too short (bench/cpu_split.py, MIN_BUSY_S).
    split = any(r["machine_cpu"] for r in doc["runs"]["drain"])
    header = "| system | worker processes | cores busy % | all µs/msg | relay |"
    assert (header in report) is split
    mine = [
        r["cpu_us_per_msg"]
        for r in doc["runs"]["drain"]
        if r["system"] == "ours" and r["workers"] == 1 and r["cpu_us_per_msg"] is not None
    ]
    if mine:
        assert f"| {' / '.join(f'{x:.1f}' for x in mine)} us |" in report
    assert "| inbox: >= 1.0x baseline in every repeat |" in report
    assert "| p99 at 200/s: <= 1.2x baseline in every repeat |" in report

    # create() cost: both modes ran (interleaved in blocks of ten), every transaction timed;
    # the headline is the trimmed means' ratio and `without / with - 1` gives it back.
    costs = doc["runs"]["create_cost"]
    assert sorted((r["system"], r["repeat"]) for r in costs) == sorted(
        (s, rep) for s in SYSTEMS for rep in range(REPEATS)
    )
    for r in costs:
        per_tx = r["us_per_tx"]
        for mode in ("without", "with"):
            assert per_tx[mode]["count"] >= 20, r  # 1 s a mode at quick sizes
            assert per_tx[mode]["count"] % 10 == 0, r
            assert 0 < per_tx[mode]["median_us"] <= per_tx[mode]["p99_us"], r
            assert per_tx[mode]["trimmed_mean_us"] <= per_tx[mode]["mean_us"], r
        assert len(r["rounds"]["without"]) == len(r["rounds"]["with"]) == 1, r
        added = per_tx["with"]["trimmed_mean_us"] / per_tx["without"]["trimmed_mean_us"] - 1
        assert r["overhead_pct"] == pytest.approx(added * 100), r
        assert r["without"] / r["with"] - 1 == pytest.approx(added), r
    assert "| added time per tx | the same, all tx | the same, medians |" in report

    # Many workers (ours alone): every join and every leave settled (all 256 buckets owned
    # by the expected members, none above its share), nothing lost, per-key order kept.
    scale = doc["runs"]["scale"]
    assert [r["system"] for r in scale] == ["ours"] * REPEATS
    for r in scale:
        changes = [(c["change"], c["workers"]) for c in r["changes"]]
        assert changes == [("join", 1), ("join", 2), ("join", 3), ("leave", 2), ("leave", 1)]
        assert all(c["settle_s"] is not None and c["settle_s"] < 30 for c in r["changes"]), r
        assert (r["lost"], r["order_violations"], r["unsettled"]) == (0, 0, 0), r
        assert r["delivered"] == r["committed"] > 0, r
    assert "## 5. Many workers joining and leaving" in report
    assert "| leave | 1 |" in report

    # Idle cost: ours with 10 boxes, the baseline with its one table; statements counted by
    # pg_stat_statements (the services preload it), CPU read from /proc for both processes.
    idle = doc["runs"]["idle"]
    assert sorted((r["system"], r["boxes"]) for r in idle) == sorted(
        [("ours", 10), ("baseline", 1)] * REPEATS
    )
    for r in idle:
        assert r["problems"] == [], r
        assert 5 < r["seconds"] < 30, r
        assert r["statements_per_s"] is not None, r
        assert r["statements_per_s"] > 0, r
        assert r["transactions_per_s"] > 0, r
        assert 0 <= r["relay_cpu_pct"] < 200, r
        assert 0 <= r["consumer_cpu_pct"] < 200, r
        assert r["backends"] >= 1, r
    assert "## 6. Idle cost" in report
    assert "| idle, 10 boxes: < 20 statements/s in all (every repeat) |" in report

    # Table growth: each system drained the whole backlog behind 0 and 20,000 delivered rows
    # (all there before the drain, none deleted when kept) and while retention purged them;
    # ours' claim read the pending rows' partial index at every size.
    growth = doc["runs"]["growth"]
    assert sorted((r["system"], r["case"], r["repeat"]) for r in growth) == sorted(
        (s, c, rep) for s in SYSTEMS for c in GROWTH_CASES for rep in range(REPEATS)
    )
    for r in growth:
        assert r["rows"] == r["rows_before"] == (0 if r["case"] == "0" else 20_000), r
        assert (r["delivered"], r["order_violations"], r["problems"]) == (5_000, 0, []), r
        if r["purging"]:
            assert 0 < r["purged"] <= 20_000, r
        else:
            assert r["purged"] == 0, r
        if r["system"] == "ours":
            assert r["range_scan"] is True, r
            assert any("ix_order_outbox_items_pending" in line for line in r["plan"]), r
            assert not any("Seq Scan" in line for line in r["plan"] + r["plan_default"]), r
    assert "## 7. Cost as the table grows" in report
    runs = REPEATS * len(GROWTH_CASES)
    assert (
        f"| the claim is an index range scan at every table size (ours, every run) "
        f"| {runs} of {runs} runs | yes |"
    ) in report
    assert "| drain with 20,000 delivered rows kept: >= 0.90x of 0 rows" in report

    # Memory: each system's relay drained a 20k backlog (none left pending) and its consumer
    # stored 20k messages once each, their RSS sampled all along.
    memory = doc["runs"]["memory"]
    assert sorted((r["system"], r["repeat"]) for r in memory) == sorted(
        (s, rep) for s in SYSTEMS for rep in range(REPEATS)
    )
    for r in memory:
        found = (r["items"], r["left_pending"], r["lost"], r["stored_duplicates"], r["problems"])
        assert found == (20_000, 0, 0, 0, []), r
        for name in ("relay", "consumer"):
            m = r[name]
            # A 20k backlog can go in one sample interval: the first half may have no
            # sample (then flatness cannot be told), the second always has the last one.
            first, second = m["rss_mb_first_half"], m["rss_mb_second_half"]
            assert 10 < second <= m["rss_mb_peak"] < 1000, (name, r)
            if first is None:
                assert m["flat"] is None, (name, r)
            else:
                assert 0 < first <= m["rss_mb_peak"], (name, r)
                assert m["flat"] is (second <= first * 1.10), (name, r)
            assert len(m["samples"]) >= 2, (name, r)
            assert m["samples"][-1][2] == 20_000, (name, r)
    assert "## 8. Memory draining a large backlog" in report

    # Mixed load (ours alone): 50 orders/s through the api and 50 payments/s through the
    # inbox for 5 s; every order relayed, every payment stored, handled and its order_paid
    # relayed, latencies from each path's own start.
    mixed = doc["runs"]["mixed"]
    assert [r["system"] for r in mixed] == ["ours"] * REPEATS
    for r in mixed:
        assert r["problems"] == [], r
        assert (r["api_errors"], r["relay_undelivered"], r["inbox_unhandled"]) == (0, 0, 0), r
        assert r["inbox_sent"] == 250, r
        assert 25 < r["api_rate"] <= 55, r  # 50 offered; achieved over the whole run
        for path in ("api", "relay", "inbox"):
            assert 0 < r[f"{path}_p50"] <= r[f"{path}_p99"] < 30_000, (path, r)
    assert "## 9. Mixed load: api, relay and inbox at once" in report
    assert "| memory, relay draining 20,000: peak < 250 MB and flat (ours, every repeat) |" in (
        report
    )


def _listed(runs: list[dict[str, Any]], metric: str, spec: str) -> str:
    """What the report lists for runs made in rounds, sorted by repeat: each repeat's rounds
    joined by " / ", the kept one in bold, repeats joined by "; "."""
    return "; ".join(
        " / ".join(
            f"**{x[metric]:{spec}}**" if x["kept"] else f"{x[metric]:{spec}}" for x in r["rounds"]
        )
        for r in runs
    )


def test_cpu_time_and_memory_of_a_process_are_read_from_proc() -> None:
    """A child that burns 0.4 s of CPU and holds 64 MiB: /proc says so; once it is reaped,
    nothing is read."""
    procs = load_bench_module("procs")
    burn = (
        "import time\n"
        "block = bytearray(64 * 1024 * 1024)\n"
        "for i in range(0, len(block), 4096): block[i] = 1\n"
        "end = time.process_time() + 0.4\n"
        "while time.process_time() < end: pass\n"
        "print('done', flush=True)\n"
        "time.sleep(30)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", burn], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "done\n"
        cpu = procs.cpu_seconds(child.pid)
        rss, peak = procs.memory_mb(child.pid)
        assert 0.4 <= cpu < 3.0, cpu
        assert 64 <= rss <= peak < 512, (rss, peak)
    finally:
        child.kill()
        child.wait(10)
    assert procs.cpu_seconds(child.pid) is None
    assert procs.memory_mb(child.pid) is None
