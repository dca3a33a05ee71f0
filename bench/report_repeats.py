"""The report's "every repeat" section: each repeat's value per system with its position in
that repeat's order and the load it started on, each repeat's ratio ours / baseline and ours /
each peer, then the spread of every ratio over the repeats. Medians alone hid that the lead
of one run did not reproduce in the next; this section makes that visible."""

from __future__ import annotations

import math
from typing import Any

from .ratios import BASELINE, OURS
from .settle import QUIET_WINDOW_S


def _num(value: float | None, digits: int) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    return f"{value:,.{digits}f}"


def _x(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f}x"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def render(
    rows: list[dict[str, Any]],
    spreads: list[dict[str, Any]],
    systems: list[str],
    meta: dict[str, Any],
) -> list[str]:
    others = [s for s in systems if s != OURS]
    out = [
        f"Seed {meta['seed']} (replay the order with `--seed {meta['seed']}`). Order of the "
        "systems per repeat: "
        + "; ".join(f"{i + 1}: {', '.join(o)}" for i, o in enumerate(meta["orders"]))
        + f". {meta['settle_note']}",
        "",
        "Each cell: the run's value, its position in that repeat's order (#1 = first), "
        f"how active the CPU was in the {QUIET_WINDOW_S:g} s before it started (every core) "
        "and the share of its time the host's cores "
        "were in their slow mode (bench/host.py). Ratios are ours / the other system in the "
        "same repeat (rates: above 1 is ours faster; p99 and added cost: below 1 is ours lower).",
        "",
    ]
    scenario_names = list(dict.fromkeys(r["scenario"] for r in rows))
    for name in scenario_names:
        mine = [r for r in rows if r["scenario"] == name]
        present = [s for s in systems if any(s in r["values"] for r in mine)]
        digits = 1 if mine[0]["metric"] != "rate" else 0
        header = ["case", "repeat", *present]
        header += [f"ours / {s}" for s in others if s in present]
        table = []
        for r in mine:
            cells = [r["case"] or "-", str(r["repeat"] + 1)]
            for s in present:
                if s in r["values"]:
                    slow = r.get("host_slow", {}).get(s)
                    host = "" if slow is None else f", host slow {slow:.0%}"
                    cells.append(
                        f"{_num(r['values'][s], digits)} (#{r['positions'][s] + 1}, "
                        f"CPU {r['cpu_active'][s]:.0f}% active{host})"
                    )
                else:
                    cells.append("-")
            cells += [_x(r["ratios"].get(s)) for s in others if s in present]
            table.append(cells)
        out += [f"**{name}** ({mine[0]['metric']})", ""]
        out += _table(header, table)
        out.append("")
    spread_rows = [
        [
            s["scenario"],
            s["case"] or "-",
            f"ours / {s['vs']}",
            _x(s["min"]),
            _x(s["median"]),
            _x(s["max"]),
            _num(100 * s["rel_spread"], 0) + " %",
            str(s["n"]),
        ]
        for s in spreads
        if s["vs"] == BASELINE or s["vs"] in others
    ]
    out += [
        "**Spread of the ratios over the repeats** (relative spread = (max - min) / median)",
        "",
    ]
    out += _table(
        ["scenario", "case", "ratio", "min", "median", "max", "relative spread", "repeats"],
        spread_rows,
    )
    out.append("")
    return out
