"""The report's drain section: msgs/s per system and worker count, ratios to the baseline
and by ours, what was delivered, the relay's CPU and memory, and Debezium's hand-over."""

from __future__ import annotations

import statistics
from typing import Any

from .report_fmt import BASELINE, OURS, median_of, ratio, rounds_listed, summary
from .report_fmt import table as _table
from .systems import OURS_DEBEZIUM


def render(drains: list[dict[str, Any]], systems: list[str], meta: dict[str, Any]) -> list[str]:
    out: list[str] = []
    add = out.append
    add("## 1. Drain a backlog to Kafka")
    add("")
    add(
        f"{meta['backlog']:,} items of ~{meta['size']} B in {meta['keys']:,} keys, already "
        "committed; the relay starts and sends them all. msgs/s = distinct message ids seen on "
        "the topic / time from the first to the last one (the topic is read back while it "
        "fills). " + meta["cap_note"]
    )
    add("")
    rows = []
    for workers in sorted({d["workers"] for d in drains}):
        base = median_of(drains, "rate", system=BASELINE, workers=workers)
        ours = median_of(drains, "rate", system=OURS, workers=workers)
        for system in systems:
            mine = [d for d in drains if d["system"] == system and d["workers"] == workers]
            if not mine:
                continue
            rate = statistics.median(d["rate"] for d in mine)
            delivered = "/".join(f"{d['delivered']:,}" for d in mine)
            rows.append(
                [
                    system,
                    "1 connector task" if system == OURS_DEBEZIUM else str(workers),
                    summary(d["rate"] for d in mine),
                    ratio(rate, base),
                    ratio(ours, rate) if system != OURS else "-",
                    delivered,
                    str(sum(d["duplicates"] for d in mine)),
                    str(sum(d["order_violations"] for d in mine)),
                    summary((d.get("cpu_us_per_msg") for d in mine), 1),
                    summary(d.get("rss_mb_peak") for d in mine),
                ]
            )
    out += _table(
        [
            "system",
            "worker processes",
            "msgs/s",
            "vs baseline",
            "ours vs it",
            "delivered per repeat",
            "duplicates",
            "order violations",
            "relay CPU µs/msg",
            "relay RSS peak MiB",
        ],
        rows,
    )
    add("")
    add(
        "Relay CPU µs/msg (one relay process): user + system CPU time of the process (every "
        "thread, from `/proc/<pid>/stat`) from the first message on the topic to the last, per "
        "message delivered meanwhile; start-up is not counted, and the number hardly depends "
        "on what else the machine runs. With two processes it is n/a: the second may still "
        "be starting up when the first message is out. Relay RSS peak: the largest relay "
        "process's peak resident memory (`VmHWM`). Debezium's are n/a (the Connect worker's "
        "JVM is shared)."
    )
    add("")
    out += _rounds(drains, systems)
    out += _machine_cpu(drains, systems)
    debezium = [d for d in drains if d["system"] == OURS_DEBEZIUM]
    if debezium:
        add(
            f"{OURS_DEBEZIUM}: the switch to Debezium hands the whole backlog over in one "
            "transaction (its pending items copied to the capture table); from its commit, "
            "the first message was on the topic after "
            + summary((d["commit_to_first"] for d in debezium), 1)
            + " s (PostgreSQL decodes a transaction once it has committed) and the last after "
            + summary((d["commit_to_last"] for d in debezium), 1)
            + " s. The switch's transaction itself took "
            + summary((d["switch_s"] for d in debezium), 1)
            + " s and registering the connector "
            + summary((d["register_s"] for d in debezium), 1)
            + " s (neither is part of the rate)."
        )
        add("")
    add("![drain throughput](img/bench-throughput.png)")
    add("")

    return out


def _rounds(drains: list[dict[str, Any]], systems: list[str]) -> list[str]:
    """Every round of the drains made in rounds (bench/rounds.py), the kept one in bold."""
    lines = []
    for workers in sorted({d["workers"] for d in drains}):
        for system in systems:
            mine = [d for d in drains if d["system"] == system and d["workers"] == workers]
            listed = rounds_listed(mine, "rate", ",.0f")
            if listed:
                lines.append(f"- {system}, {workers} worker(s): {listed}")
    if not lines:
        return []
    return [
        f"Rounds: each repeat drains ours, {OURS_DEBEZIUM} and the baseline "
        f"{max(len(d['rounds']) for d in drains if d.get('rounds'))} times (each from a fresh settled copy; the "
        "rounds interleaved across the systems, the repeat's order then reversed), and keeps "
        "the round with the median rate: a drain of 2-5 s falls mostly in one of the host's "
        "fast or slow phases (bench/host.py), and the median of several is steadier than one. "
        "Every round's msgs/s per repeat (the kept one in bold):",
        "",
        *lines,
        "",
    ]


SPLIT = ("all", "relays", "postgres", "kafka", "harness", "other")


def _machine_cpu(drains: list[dict[str, Any]], systems: list[str]) -> list[str]:
    """The whole machine's CPU per message in each drain's window (bench/cpu_split.py)."""
    rows = []
    for workers in sorted({d["workers"] for d in drains}):
        for system in systems:
            mine = [
                d["machine_cpu"]
                for d in drains
                if d["system"] == system and d["workers"] == workers and d.get("machine_cpu")
            ]
            if not mine:
                continue
            rows.append(
                [system, str(workers), summary((m["busy_pct"] for m in mine), 0)]
                + [summary((m[k] for m in mine), 1) for k in SPLIT]
            )
    if not rows:
        return []
    out = [
        "Where the machine's CPU went in the same window (first message to last), in µs "
        "per message: every core's busy time (`/proc/stat`), and of it the relay process "
        "(one worker only), PostgreSQL (every `postgres` process), the Kafka broker, the "
        "harness's reader of the topic and the rest (Kafka Connect when up, the kernel). "
        "When the cores are busy throughout, the rate is what a message costs all of them "
        "together: a relay that spends more of its own leaves the others less.",
        "",
    ]
    out += _table(
        [
            "system",
            "worker processes",
            "cores busy %",
            "all µs/msg",
            "relay",
            "PostgreSQL",
            "Kafka broker",
            "reader",
            "other",
        ],
        rows,
    )
    out.append("")
    return out
