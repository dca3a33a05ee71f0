"""Writing a run's report: docs/benchmarks.md, its plots, and the results files next to it
(benchmarks-results.json / .csv)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import plots, report, results_files, targets
from .envs import ROOT
from .loop import Outcome
from .ratios import all_rows, spreads
from .registry import SCENARIOS
from .systems import OWN_SYSTEMS

# What a results file says about its run besides the numbers: when it started, the command
# that replays it, the machine and its state. bench.compare prints them beside the ratios,
# so both the report's results file and the last run's results.json carry them.
RUN_FACTS = ("started", "command", "load_note", "settle_note", "machine", "broker_warmup")


def write(out: Path, outcome: Outcome, systems: list[str], meta: dict[str, Any]) -> None:
    results: dict[str, list[dict[str, Any]]] = {s.key: [] for s in SCENARIOS}
    results.update(outcome.results)
    peers = [s for s in systems if s not in OWN_SYSTEMS]
    meta["per_repeat"] = all_rows(list(SCENARIOS), results, systems)
    meta["spreads"] = spreads(meta["per_repeat"])
    meta["targets"] = targets.target_rows(
        results, peers, lambda ok: "yes" if ok else "**no**", meta["per_repeat"]
    )
    notes = ROOT / "bench" / "notes.md"
    meta["notes"] = notes.read_text() if notes.exists() else ""
    (out / "img").mkdir(parents=True, exist_ok=True)
    plots.throughput_bars(results["drain"], systems, out / "img" / "bench-throughput.png")
    plots.latency_cdf(results["steady"], systems, out / "img" / "bench-latency-cdf.png")
    (out / "benchmarks.md").write_text(report.render(results, systems, meta))
    extra = {k: meta[k] for k in ("repeats", *RUN_FACTS)}
    results_files.write(out, "benchmarks-results", outcome, list(SCENARIOS), systems, extra)
