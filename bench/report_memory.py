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
        "VmHWM. `at a tenth` is the RSS once a tenth of the work is done (start-up and the "
        "first allocations over); flat = the highest RSS after that is at most "
        f"{(FLAT - 1) * 100:.0f}% above it. Target: peak < {LIMIT_MB} MB for each, flat.",
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
                    fmt(m["rss_mb_tenth"]),
                    fmt(m["rss_mb_after_tenth_peak"]),
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
            "RSS MiB at a tenth",
            "highest after",
            "peak (VmHWM) MiB",
            "flat",
        ],
        body,
    )
    out.append("")
    return out
