"""The report's table-growth section (bench/growth.py): the drain as the outbox table holds
more delivered rows, and while retention purges them, each against the same system's drain
at 0 rows in the same repeat; the claim's plan at the largest size."""

from __future__ import annotations

from typing import Any

from .report_fmt import OURS, fmt, table


def falls(rows: list[dict[str, Any]], system: str) -> list[tuple[str, int, float]]:
    """(case, repeat, rate / the rate at 0 rows) for every case of `system` with rows."""
    zero = {r["repeat"]: r["rate"] for r in rows if r["system"] == system and not r["rows"]}
    return [
        (r["case"], r["repeat"], r["rate"] / zero[r["repeat"]])
        for r in rows
        if r["system"] == system and r["rows"] and zero.get(r["repeat"])
    ]


def render(rows: list[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    if not rows:
        return []
    out = [
        "The backlog drained by one relay process while the outbox table already holds N "
        "delivered rows awaiting retention (written before the backlog, so they have the "
        "lower ids; their message ids of the kind each system makes: ours UUID version 7, "
        "time-ordered, the baseline's random), and once more while retention purges N "
        "expired rows: ours with its worker's own retention (delivered kept PT1H, its loop "
        "every 0.1 s), the baseline with "
        "its hand-written purge (id-ordered batches of 1,000) beside its relay. Each size is "
        "a template built once per run; every run's database is a FILE_COPY of it, then "
        "vacuumed, analysed and checkpointed like every run. `vs 0 rows` is the rate over "
        "the same system's rate at 0 rows in the same repeat.",
        "",
    ]
    ratio = {(s, c, rep): x for s in {r["system"] for r in rows} for c, rep, x in falls(rows, s)}
    body = []
    for r in sorted(rows, key=lambda r: (r["system"], r["rows"], r["purging"], r["repeat"])):
        x = ratio.get((r["system"], r["case"], r["repeat"]))
        body.append(
            [
                r["system"],
                r["case"],
                str(r["repeat"] + 1),
                fmt(r["rate"]),
                "" if x is None else f"{x:.2f}",
                fmt(r["purged_per_s"]) if r["purging"] else "",
                {True: "index range scan", False: "NOT a range scan"}.get(r.get("range_scan"), ""),
            ]
        )
    out += table(
        ["system", "delivered rows", "repeat", "msgs/s", "vs 0 rows", "purged rows/s", "claim"],
        body,
    )
    out.append("")
    ours = [r for r in rows if r["system"] == OURS and r.get("plan")]
    if ours:
        largest = max(ours, key=lambda r: (r["rows"], not r["purging"], -r["repeat"]))
        out += [
            f"The claim's plan at {largest['rows']:,} delivered rows (repeat "
            f"{largest['repeat'] + 1}), as the relay runs it: its session's settings "
            "(sequential and bitmap scans off) and the generic plan of its prepared statement, "
            "`EXPLAIN (ANALYZE, BUFFERS)` over all of the box's buckets before the drain:",
            "",
            "```",
            *largest["plan"],
            "```",
            "",
            "With the server's defaults and the parameters bound (a custom plan):",
            "",
            "```",
            *largest["plan_default"],
            "```",
            "",
        ]
    return out
