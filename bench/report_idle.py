"""The report's idle-cost section (bench/idle.py): what a relay and a consumer with nothing
to do cost, per repeat."""

from __future__ import annotations

from typing import Any


def _num(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


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
        "| system | repeat | boxes | statements/s | transactions/s | relay CPU % | "
        "consumer CPU % | PostgreSQL backends CPU % |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in sorted(rows, key=lambda r: (r["system"], r["repeat"])):
        out.append(
            f"| {r['system']} | {r['repeat'] + 1} | {r['boxes']} | "
            f"{_num(r['statements_per_s'], 1)} | {r['transactions_per_s']:.1f} | "
            f"{r['relay_cpu_pct']:.2f} | {r['consumer_cpu_pct']:.2f} | "
            f"{r['backend_cpu_pct']:.2f} |"
        )
    out.append("")
    return out
