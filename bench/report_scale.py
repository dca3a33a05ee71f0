"""The report's many-workers section (bench/scale.py): per change of membership, how long
until the box was settled again, for every repeat."""

from __future__ import annotations

import math
from typing import Any


def render(rows: list[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    if not rows:
        return []
    first = rows[0]
    out = [
        f"Ours alone: its outbox box with {first['buckets']} buckets, {first['workers']} worker "
        f"processes started one by one every {meta['scale_step']:.0f} s, then stopped (SIGTERM) "
        f"one by one down to one, while a load commits {meta['scale_rate']:,} items/s. "
        "Settled = exactly the expected number of workers, every bucket locked by one of "
        "them and none holding more than its share (ceil(buckets / workers)), read from "
        "PostgreSQL's `pg_locks` every 10 ms. A join is timed from the moment the new "
        "worker's member lock appears (its start-up before that is shown apart), a leave from "
        "the SIGTERM. The baseline's ownership is static and the peers have none, so they "
        "are not run.",
        "",
    ]
    repeats = sorted(rows, key=lambda r: r["repeat"])
    header = ["change", "workers after"] + [f"repeat {r['repeat'] + 1} ms" for r in repeats]
    out += ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    for index, change in enumerate(first["changes"]):
        cells = [change["change"], str(change["workers"])]
        for r in repeats:
            settle = r["changes"][index]["settle_s"] if index < len(r["changes"]) else None
            cells.append("not settled in 30 s" if settle is None else f"{settle * 1000:,.0f}")
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    starts = [c["start_s"] for r in rows for c in r["changes"] if c.get("start_s") is not None]
    worst = [r["max_settle_ms"] for r in rows if not math.isnan(r["max_settle_ms"])]
    out += [
        "Per repeat: "
        + "; ".join(
            f"{r['delivered']:,}/{r['committed']:,} delivered, {r['duplicates']} duplicates, "
            f"{r['order_violations']} order violations"
            for r in repeats
        )
        + (
            f". Slowest change {max(worst):,.0f} ms. A new worker process took "
            f"{min(starts):.1f}-{max(starts):.1f} s from its start to joining (imports, "
            "connections)."
            if worst and starts
            else "."
        ),
        "",
    ]
    return out
