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
        relay = f", relay {s.relay}" if s.relay else ""
        lines.append(f"{s.kind} {s.box} ({s.table}{relay})")
        lines.append(f"  {counts}")
        if s.capture is not None:
            lines.extend(_capture_lines(s))
            continue
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


def _capture_lines(s: BoxStats) -> list[str]:
    """A box Debezium relays: its capture instead of the worker's figures (backlog, hot
    buckets and keys, failing events), which never apply to it."""
    c = s.capture or {}
    trigger = f"capture trigger to topic {c['topic']}" if c["trigger"] else "NO capture trigger"
    if not c["slot_exists"]:
        slot = f"slot {c['slot']} MISSING"
    else:
        state = "streaming" if c["slot_active"] else "NOT streaming"
        slot = f"slot {c['slot']} {state}, {c['lag_bytes'] or 0} bytes behind"
    lines = [f"  debezium: {trigger}; {slot}; {c['capture_rows']} capture rows"]
    if s.counts.get("pending"):
        lines.append(f"  pending: {s.counts['pending']} (nothing relays them without the trigger)")
    if s.paused:
        lines.append(f"  PAUSED: {'; '.join(s.paused)}")
    lines.extend(f"  PROBLEM: {p}" for p in c["problems"])
    return lines
