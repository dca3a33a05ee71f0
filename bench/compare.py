"""Do two runs agree? `python -m bench.compare FIRST.json SECOND.json [--tolerance 0.15]`

The reproduction rule of the published report: a second full run, on another day, gives
ratios within 15% of the first. Absolute rates follow the shared machine's state and are not
compared; a ratio (ours / another system, same repeat and case) should not. For each
(scenario, case, other system) present in both results files (docs/benchmarks-results.json
or a run's results.json) this prints, as a markdown table, the first and the second run's
median of the ratio over its repeats with the range, the change (second / first - 1), and
whether it is within the tolerance, and whether the second median falls inside the first
run's own range over its repeats (a value the first run produced itself, between its
repeats: where the first run's repeats spread wider than the tolerance, that is the fairer
reading of "the same"). Exit 0 when every shared ratio is within the tolerance, 1 when one
is not, 2 when the files share no ratio (or cannot be read); the range column does not
change the exit code. Ratios found in one file only
are listed after the table: a scenario one of the runs did not have is not a failure, but
it is not a reproduction either.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, NamedTuple

Key = tuple[str, str, str]  # scenario, case, the other system


class Run(NamedTuple):
    started: str  # when the run started, as its file says
    spreads: dict[Key, dict[str, Any]]  # its ratio spreads, keyed by (scenario, case, vs)
    cpu: str  # its "CPU: ..." machine line ("" when it has none)


def load(path: Path) -> Run:
    """One results file, read once."""
    doc = json.loads(path.read_text())
    spreads = doc.get("spreads")
    if not isinstance(spreads, list):
        raise ValueError(f"{path}: no 'spreads' list (not a bench results file)")
    keyed = {(s["scenario"], s["case"], s["vs"]): s for s in spreads}
    machine = doc.get("machine") or []
    cpu = next((m for m in machine if isinstance(m, str) and m.startswith("CPU:")), "")
    return Run(str(doc.get("started", "?")), keyed, cpu)


def machines_note(first: str, second: str) -> str:
    """Which machines the two runs had; runs on different CPUs are not the rule's case.
    Files written before the CPU line named family and model only say e.g. "AMD EPYC"."""
    if not first or not second:
        return "Machines: not known for both runs."
    if first == second:
        return f"Both runs: {first.removeprefix('CPU: ')}."
    described = ["family " in line for line in (first, second)]
    if not all(described):
        which = " and ".join(
            name for name, ok in zip(("first", "second"), described, strict=True) if not ok
        )
        return (
            f"Machines: first {first.removeprefix('CPU: ')}; second "
            f"{second.removeprefix('CPU: ')}. The {which} run's file does not name the CPU's "
            "family and model, so whether both ran on one kind of CPU is not known."
        )
    return (
        f"The machines differ (first: {first.removeprefix('CPU: ')}; second: "
        f"{second.removeprefix('CPU: ')}): ratios against the single-connection baseline "
        "follow the CPU, so this is not the rule's comparison of one kind of machine."
    )


def change(first: float, second: float) -> float:
    """second / first - 1; nan when the first is 0 or either is not a number."""
    if not first or math.isnan(first) or math.isnan(second):
        return float("nan")
    return second / first - 1.0


def in_range(first: dict[str, Any], value: float) -> bool:
    """Whether value lies within the first run's min..max over its repeats (inclusive)."""
    low, high = float(first["min"]), float(first["max"])
    return not math.isnan(value) and low <= value <= high


def compare(
    first: dict[Key, dict[str, Any]], second: dict[Key, dict[str, Any]], tolerance: float
) -> list[dict[str, Any]]:
    """One row per key in both, in the first file's order."""
    rows = []
    for key, a in first.items():
        b = second.get(key)
        if b is None:
            continue
        delta = change(float(a["median"]), float(b["median"]))
        rows.append(
            {
                "key": key,
                "first": a,
                "second": b,
                "change": delta,
                "within": not math.isnan(delta) and abs(delta) <= tolerance,
                "in_range": in_range(a, float(b["median"])),
            }
        )
    return rows


def _ratio(s: dict[str, Any]) -> str:
    return f"{s['median']:.2f}x ({s['min']:.2f}-{s['max']:.2f}, {s['n']} repeats)"


def render(
    names: tuple[str, str],
    rows: list[dict[str, Any]],
    only: tuple[list[Key], list[Key]],
    tolerance: float,
) -> str:
    lines = [
        f"| scenario | case | ours vs | first run ({names[0]}) | second run ({names[1]}) "
        f"| change | within {tolerance:.0%} | in the first's range |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        scenario, case, vs = row["key"]
        delta = "n/a" if math.isnan(row["change"]) else f"{row['change']:+.1%}"
        lines.append(
            f"| {scenario} | {case} | {vs} | {_ratio(row['first'])} | {_ratio(row['second'])} "
            f"| {delta} | {'yes' if row['within'] else 'NO'} "
            f"| {'yes' if row['in_range'] else 'no'} |"
        )
    within = sum(1 for r in rows if r["within"])
    in_range_count = sum(1 for r in rows if r["in_range"])
    lines.append("")
    lines.append(f"{within} of {len(rows)} ratios within {tolerance:.0%}.")
    lines.append(
        f"{in_range_count} of {len(rows)} second-run medians inside the first run's own range "
        "over its repeats."
    )
    for label, keys in zip(("first", "second"), only, strict=True):
        if keys:
            listed = ", ".join("/".join(k) for k in keys)
            lines.append(f"Only in the {label} run (not compared): {listed}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__)
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--tolerance", type=float, default=0.15, help="default 0.15 (15%%)")
    args = parser.parse_args(argv)
    if not 0 < args.tolerance < 10:
        parser.error("--tolerance: a fraction above 0, e.g. 0.15")
    try:
        one, two = load(args.first), load(args.second)
    except (OSError, ValueError, KeyError) as exc:
        print(f"bench.compare: {exc}", file=sys.stderr)
        return 2
    first, second = one.spreads, two.spreads
    rows = compare(first, second, args.tolerance)
    only = ([k for k in first if k not in second], [k for k in second if k not in first])
    print(render((one.started, two.started), rows, only, args.tolerance))
    print(machines_note(one.cpu, two.cpu))
    if not rows:
        print("bench.compare: the two runs share no ratio", file=sys.stderr)
        return 2
    return 0 if all(r["within"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
