"""The report's inbox section (bench/scenarios.py `inbox`): each system's ingest of the
same topic of messages with duplicates, its ratio to the baseline, and every round."""

from __future__ import annotations

import statistics
from typing import Any

from .report_fmt import BASELINE, median_of, ratio, rounds_listed, summary, table
from .rounds import all_runs


def render(inboxes: list[dict[str, Any]], systems: list[str], meta: dict[str, Any]) -> list[str]:
    out = ["## 3. Inbox ingest with duplicates", "", meta["inbox_note"], ""]
    rows = []
    base = median_of(inboxes, "rate", system=BASELINE)
    for system in systems:
        mine = [i for i in inboxes if i["system"] == system]
        if not mine:
            continue
        rows.append(
            [
                system,
                summary(i["rate"] for i in mine),
                summary(i["consumed_rate"] for i in mine),
                ratio(statistics.median(i["rate"] for i in mine), base),
                "/".join(f"{i['stored']:,}" for i in mine),
                # Every round's, not only the kept ones: a round that lost a message fails
                # the run whichever round was kept (bench/checks.py).
                str(sum(i["lost"] for i in all_runs(mine))),
                str(sum(i["stored_duplicates"] for i in all_runs(mine))),
                summary(i.get("rss_mb_peak") for i in mine),
            ]
        )
    out += table(
        [
            "system",
            "stored rows/s",
            "consumed msgs/s",
            "vs baseline",
            "stored per repeat",
            "lost",
            "stored twice",
            "consumer RSS peak MiB",
        ],
        rows,
    )
    out.append("")
    out += _rounds(inboxes, systems)
    return out


def _rounds(inboxes: list[dict[str, Any]], systems: list[str]) -> list[str]:
    """Every round's rate of the ingests made in rounds (bench/rounds.py), the kept one in
    bold."""
    lines = []
    for system in systems:
        listed = rounds_listed([i for i in inboxes if i["system"] == system], "rate", ",.0f")
        if listed:
            lines.append(f"- {system}: {listed}")
    if not lines:
        return []
    made = max(len(i["rounds"]) for i in inboxes if i.get("rounds"))
    return [
        f"Rounds: each repeat ingests the topic {made} times per system (each from a fresh "
        "settled copy and a new consumer group; the rounds interleaved across the systems, "
        "the repeat's order then reversed), and keeps the round with the median rate: an "
        "ingest of a few seconds falls mostly in one of the host's fast or slow phases "
        "(bench/host.py), as a drain does. Every round's rows/s per repeat (the kept one in "
        "bold):",
        "",
        *lines,
        "",
    ]
