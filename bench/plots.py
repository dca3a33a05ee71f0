"""PNG plots for docs/img: drain throughput bars and latency CDFs."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def throughput_bars(drains: list[dict[str, Any]], systems: list[str], path: Path) -> None:
    if not drains:
        return  # drain was not run (a --scenarios subset)
    figure, axis = plt.subplots(figsize=(8, 4.5))
    worker_counts = sorted({d["workers"] for d in drains})
    width = 0.8 / max(len(worker_counts), 1)
    for index, workers in enumerate(worker_counts):
        medians, lows, highs = [], [], []
        for system in systems:
            rates = [d["rate"] for d in drains if d["system"] == system and d["workers"] == workers]
            median = statistics.median(rates) if rates else 0.0
            medians.append(median)
            lows.append(median - min(rates) if rates else 0.0)
            highs.append(max(rates) - median if rates else 0.0)
        positions = [i + index * width for i in range(len(systems))]
        bars = axis.bar(
            positions,
            medians,
            width,
            yerr=[lows, highs],
            capsize=3,
            label=f"{workers} worker process{'es' if workers > 1 else ''}",
        )
        axis.bar_label(
            bars, labels=[f"{m:,.0f}" if m else "" for m in medians], fontsize=8, padding=2
        )
    axis.set_xticks([i + width * (len(worker_counts) - 1) / 2 for i in range(len(systems))])
    axis.set_xticklabels(systems)
    axis.set_ylabel("messages/s (distinct ids seen on the topic)")
    axis.set_title("Drain a 1 KB backlog to Kafka (median, min-max over repeats)")
    axis.legend()
    axis.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def latency_cdf(steadies: list[dict[str, Any]], systems: list[str], path: Path) -> None:
    rates = sorted({s["rate"] for s in steadies})
    if not rates:
        return  # steady was not run (a --scenarios subset)
    figure, axes = plt.subplots(1, len(rates), figsize=(6 * len(rates), 4.5), squeeze=False)
    for axis, rate in zip(axes[0], rates, strict=True):
        for system in systems:
            values = sorted(
                v
                for s in steadies
                if s["system"] == system and s["rate"] == rate
                for v in s["latencies"]
            )
            if not values:
                continue
            fractions = [(i + 1) / len(values) for i in range(len(values))]
            axis.plot(values, fractions, label=system)
        axis.set_xscale("log")
        axis.set_xlabel("commit -> consumer receive (ms, log scale)")
        axis.set_ylabel("fraction of items")
        axis.set_title(f"Latency CDF at {rate} items/s (all repeats)")
        axis.grid(alpha=0.3, which="both")
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
