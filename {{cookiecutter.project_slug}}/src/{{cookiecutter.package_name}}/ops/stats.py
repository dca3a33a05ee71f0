"""`stats` as text for a terminal (the statistics themselves: outbox_engine/operations/stats.py)."""

from __future__ import annotations

from outbox_engine.operations.stats import BoxStats


def render(stats: list[BoxStats]) -> str:
    """Stats as text for a terminal."""
    lines: list[str] = []
    for s in stats:
        age = (
            "-" if s.oldest_pending_age_seconds is None else f"{s.oldest_pending_age_seconds:.1f}s"
        )
        counts = "  ".join(f"{name} {n}" for name, n in s.counts.items())
        lines.append(f"{s.kind} {s.box} ({s.table})")
        lines.append(f"  {counts}")
        lines.append(
            f"  pending: {s.pending_due} due, {s.pending_waiting} in backoff; oldest {age}"
        )
        if s.paused:
            lines.append(f"  PAUSED: {'; '.join(s.paused)}")
        if s.deepest_buckets:
            lines.append(
                "  deepest buckets: " + ", ".join(f"{b} ({n})" for b, n in s.deepest_buckets)
            )
        if s.deepest_keys:
            lines.append("  deepest keys: " + ", ".join(f"{k!r} ({n})" for k, n in s.deepest_keys))
        for f in s.failing:
            error = (f.last_error or "").splitlines()[0][:120] if f.last_error else "-"
            lines.append(
                f"  failing {f.event_name}: {f.failed} failed, {f.retrying} retrying; last: {error}"
            )
    return "\n".join(lines)
