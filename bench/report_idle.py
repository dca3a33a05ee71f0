"""The report's idle-cost section (bench/idle.py): what a relay and a consumer with nothing
to do cost, per repeat."""

from __future__ import annotations

from typing import Any

from .report_fmt import fmt, table


def render(rows: list[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    if not rows:
        return []
    ours = next((r for r in rows if r["boxes"] > 1), rows[0])
    out = [
        f"Nothing to relay and nothing to consume, {meta['idle_seconds']:.0f} s measured after "
        f"{meta['idle_warmup']:.0f} s of start-up. Ours: one `worker` (2 lanes per box) and "
        f"one `consumer` serving {ours['boxes']} boxes of {ours['buckets']} buckets (half "
        "outbox, half inbox, each with its own table and topic). The baseline: its relay and "
        "its consumer (one table each). Statements are every statement the two processes "
        "sent to their database (`pg_stat_statements` calls, BEGIN and COMMIT included); CPU "
        "is % of one core from `/proc/<pid>/stat`, for the two processes and for the "
        "PostgreSQL backends serving them.",
        "",
    ]
    header = ["system", "repeat", "boxes", "statements/s", "transactions/s", "relay CPU %"]
    header += ["consumer CPU %", "PostgreSQL backends CPU %"]
    out += table(
        header,
        [
            [r["system"], str(r["repeat"] + 1), str(r["boxes"])]
            + [fmt(r["statements_per_s"], 1), fmt(r["transactions_per_s"], 1)]
            + [fmt(r[k], 2) for k in ("relay_cpu_pct", "consumer_cpu_pct", "backend_cpu_pct")]
            for r in sorted(rows, key=lambda r: (r["system"], r["repeat"]))
        ],
    )
    out.append("")
    return out
