"""The report's mixed-load section (bench/mixed.py): the api, the relay and the inbox at
once, each path's rate and latency, per repeat."""

from __future__ import annotations

from typing import Any

from .report_fmt import fmt, table


def render(rows: list[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    if not rows:
        return []
    first = rows[0]
    out = [
        f"Ours alone (the baseline and the peers have no API and no handlers): the bake's "
        f"`api` takes POST /orders at {first['api_target_rate']:,} a second over "
        f"{meta['mixed_connections']} keep-alive connections while payments for "
        f"{meta['mixed_orders']} orders arrive on its input topic at "
        f"{first['inbox_target_rate']:,} a second, for {meta['mixed_seconds']:.0f} s (the "
        f"first {meta['mixed_warmup']:.0f} s not counted); one `worker` (every box) and one "
        "`consumer` run beside it. api: from the time a request was due to its response "
        "(a server that falls behind shows it here). relay: from an order's transaction start "
        "(its `created_at`) to its `order_created` on the topic. inbox: from a payment's produce call to "
        "the `order_paid` it leads to on the topic (stored by the consumer, handled by the "
        "worker, relayed). Rates are what was achieved.",
        "",
    ]
    body = [
        [
            str(r["repeat"] + 1),
            fmt(r["api_rate"]),
            fmt(r["api_p50"], 1),
            fmt(r["api_p99"], 1),
            str(r["api_errors"]),
            fmt(r["relay_p50"], 1),
            fmt(r["relay_p99"], 1),
            str(r["relay_undelivered"]),
            fmt(r["inbox_rate"]),
            fmt(r["inbox_p50"], 1),
            fmt(r["inbox_p99"], 1),
            str(r["inbox_unhandled"]),
        ]
        for r in sorted(rows, key=lambda r: r["repeat"])
    ]
    header = ["repeat", "api orders/s", "api p50 ms", "api p99 ms", "api errors"]
    header += ["relay p50 ms", "relay p99 ms", "not relayed"]
    header += ["inbox payments/s", "inbox p50 ms", "inbox p99 ms", "not handled"]
    out += table(header, body)
    out.append("")
    return out
