"""The machine-readable results of a run: results.json (everything but the per-item
latencies, plus seed, orders, per-repeat ratios and spreads) and results.csv (one row per
timed run, every round of a case made in rounds (bench/rounds.py) with whether it was kept:
its value, its ratio to the baseline kept in the same repeat, the load it started on).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from .loop import Outcome, settle_counts
from .ratios import BASELINE, all_rows, host_slow, spreads
from .registry import Scenario
from .rounds import all_runs

CSV_COLUMNS = (
    "scenario",
    "case",
    "repeat",
    "position",
    "round",
    "kept",
    "system",
    "metric",
    "value",
    "vs_baseline",
    "load1",
    "host_slow_share",
    "cpu_active_pct",
    "quiet",
    "quiet_wait_s",
    "checkpoint",
    "vacuum_analyze",
    "settle_s",
)


def document(
    outcome: Outcome, scenarios: list[Scenario], systems: list[str], extra: dict[str, Any]
) -> dict[str, Any]:
    rows = all_rows(scenarios, outcome.results, systems)
    runs = {
        key: [_without_latencies(r) for r in results] for key, results in outcome.results.items()
    }
    return {
        **extra,
        "seed": outcome.seed,
        "orders": outcome.orders,
        "systems": systems,
        "settle_counts": settle_counts(outcome.results),
        "per_repeat": rows,
        "spreads": spreads(rows),
        "runs": runs,
    }


def _without_latencies(run: dict[str, Any]) -> dict[str, Any]:
    """The run without its per-item latencies (the plots' input, tens of thousands of
    numbers), nor those of the rounds kept beside it (bench/rounds.py)."""
    out = {k: v for k, v in run.items() if k != "latencies"}
    if "other_rounds" in out:
        out["other_rounds"] = [_without_latencies(r) for r in out["other_rounds"]]
    return out


def csv_rows(outcome: Outcome, scenarios: list[Scenario]) -> list[dict[str, Any]]:
    out = []
    for scenario in scenarios:
        results = outcome.results.get(scenario.key, [])
        base = {
            (r["case"], r["repeat"]): float(r[scenario.metric])
            for r in results
            if r["system"] == BASELINE
        }
        # Every timed run: the kept round of a case made in rounds and the others beside it.
        for r in all_runs(results):
            value = float(r[scenario.metric])
            b = base.get((r["case"], r["repeat"]))
            settled = r["settle"]
            slow = host_slow(r)
            out.append(
                {
                    "scenario": scenario.name,
                    "case": r["case"],
                    "repeat": r["repeat"],
                    "position": r["position"],
                    "round": r.get("round", 0),
                    "kept": r.get("kept", True),
                    "system": r["system"],
                    "metric": scenario.metric,
                    "value": f"{value:.3f}",
                    "vs_baseline": f"{value / b:.4f}" if b and not math.isnan(b) else "",
                    "load1": f"{settled['load1']:.2f}",
                    "host_slow_share": "" if slow is None else f"{slow:.3f}",
                    "cpu_active_pct": f"{settled['cpu_active_pct']:.1f}",
                    "quiet": settled["quiet"],
                    "quiet_wait_s": f"{settled['quiet_wait_s']:.1f}",
                    "checkpoint": settled["checkpoint"],
                    "vacuum_analyze": settled["vacuum_analyze"],
                    "settle_s": f"{settled['settle_s']:.2f}",
                }
            )
    return out


def write(
    directory: Path,
    stem: str,
    outcome: Outcome,
    scenarios: list[Scenario],
    systems: list[str],
    extra: dict[str, Any],
) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = directory / f"{stem}.json", directory / f"{stem}.csv"
    doc = document(outcome, scenarios, systems, extra)
    json_path.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    with csv_path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(csv_rows(outcome, scenarios))
    return json_path, csv_path
