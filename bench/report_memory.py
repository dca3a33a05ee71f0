"""The report's memory section (bench/memory.py): the resident set of the relay and of the
inbox consumer working through a large backlog, per repeat."""

from __future__ import annotations

from typing import Any

from .memory import FLAT, LIMIT_MB
from .report_fmt import fmt, table


def render(rows: list[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    if not rows:
        return []
    items = rows[0]["items"]
    out = [
        f"One relay process drains a backlog of {items:,} pending items, then the system's "
        f"inbox consumer stores an input topic of {items:,} distinct messages; the resident "
        "set (VmRSS) of each is sampled from /proc every half second, and its peak is "
        "VmHWM. `first half` is the highest RSS while the first half of the work is done "
        "(warm-up included, start-up before the first item not), `second half` the highest "
        "while the rest is (n/a: no sample there, a backlog gone within a sample); flat "
        f"= the second half's is at most {(FLAT - 1) * 100:.0f}% above the first half's "
        "(a leak keeps growing through the second half; warm-up ends early). Target: peak "
        f"< {LIMIT_MB} MB for each, flat.",
        "",
    ]
    body = []
    for r in sorted(rows, key=lambda r: (r["system"], r["repeat"])):
        for name in ("relay", "consumer"):
            m = r[name]
            body.append(
                [
                    r["system"],
                    name,
                    str(r["repeat"] + 1),
                    fmt(m["rate"]),
                    fmt(m["rss_mb_first_half"]),
                    fmt(m["rss_mb_second_half"]),
                    fmt(m["rss_mb_peak"]),
                    {True: "yes", False: "**no**"}.get(m["flat"], "n/a"),
                ]
            )
    out += table(
        [
            "system",
            "process",
            "repeat",
            "items/s",
            "RSS MiB, first half",
            "second half",
            "peak (VmHWM) MiB",
            "flat",
        ],
        body,
    )
    out.append("")
    return out
