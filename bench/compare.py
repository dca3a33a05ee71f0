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

A latency ratio against a system that left measured items undelivered in a repeat of either
run (faststream-outbox and omni-box at 2,000 items/s: tens of thousands of 60,000) is shown
but not counted, and does not change the exit code: that system's p99 is then of the items it
did deliver, and it grows with the length of the window (30 s here: 27-42 s), so the ratio
says how long the window was, not how the two systems compare. That the system fell behind
is listed under the table, for each run. Where ours left items undelivered the ratio is
counted as usual (a failure of ours is not a reason to leave it out).

Under the table, each run's machine state as its file gives it (the CPU steal during its
timed runs, the broker's bulk warm-up per round, the median share of its timed runs' time
the host's cores were slow, bench/host.py) and whether the two runs' host medians are within
HOST_TOLERANCE of each other: a second run on a busier machine or host than the first's is
where ratios that follow the machine (the p99s; bench/notes.md) move.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path
from typing import Any, NamedTuple

Key = tuple[str, str, str]  # scenario, case, the other system
# The results' machine line of the host's state (bench/meta.py writes it, bench/host.py
# measures it); found by this start. Here because this module is stdlib only.
HOST_LINE = "Host cores in the slow mode during the timed runs"
# Two runs whose hosts were slow for medians this far apart (absolute) met different hosts.
HOST_TOLERANCE = 0.15


class Run(NamedTuple):
    started: str  # when the run started, as its file says
    spreads: dict[Key, dict[str, Any]]  # its ratio spreads, keyed by (scenario, case, vs)
    cpu: str  # its "CPU: ..." machine line ("" when it has none)
    state: str  # its CPU steal and broker warm-up, in words ("" when its file has neither)
    behind: dict[Key, int]  # items the other system left undelivered, summed over repeats
    host: float | None  # the median share of its timed runs' time the host was slow


def load(path: Path) -> Run:
    """One results file, read once."""
    doc = json.loads(path.read_text())
    spreads = doc.get("spreads")
    if not isinstance(spreads, list):
        raise ValueError(f"{path}: no 'spreads' list (not a bench results file)")
    keyed = {(s["scenario"], s["case"], s["vs"]): s for s in spreads}
    machine = [m for m in doc.get("machine") or [] if isinstance(m, str)]
    cpu = next((m for m in machine if m.startswith("CPU:")), "")
    return Run(
        str(doc.get("started", "?")),
        keyed,
        cpu,
        machine_state(doc, machine),
        behind(doc, keyed),
        host_share(machine),
    )


def host_share(machine: list[str]) -> float | None:
    """The median slow share of the host from the run's machine line (bench/meta.py
    `host_line`); None when the run did not measure it."""
    line = next((m for m in machine if m.startswith(HOST_LINE + ": median ")), "")
    match = re.match(r"(\d+)%", line.removeprefix(HOST_LINE + ": median "))
    return int(match.group(1)) / 100 if match else None


def behind(doc: dict[str, Any], keyed: dict[Key, dict[str, Any]]) -> dict[Key, int]:
    """(scenario, case, other system) -> the measured items that system left undelivered in
    its repeats, for the ratios of the file whose runs count undelivered items (the steady
    scenario). Ours is never in it (see the module's docstring)."""
    out: dict[Key, int] = {}
    runs = doc.get("runs")
    for scenario, rows in runs.items() if isinstance(runs, dict) else ():
        for row in rows if isinstance(rows, list) else ():
            left = row.get("undelivered") if isinstance(row, dict) else None
            if not isinstance(left, int) or left <= 0:
                continue
            key = (scenario, str(row.get("case", "")), str(row.get("system", "")))
            if key in keyed:
                out[key] = out.get(key, 0) + left
    return out


def machine_state(doc: dict[str, Any], machine: list[str]) -> str:
    """The run's CPU steal and the broker's bulk warm-up rounds, e.g. "CPU steal 0.59%, the
    broker's warm-up 2.9 / 3.2 / 3.7 µs a message" ("" when the file has neither)."""
    parts = []
    steal = next((m for m in machine if m.startswith("CPU steal during the timed runs:")), "")
    if steal:
        parts.append("CPU steal " + steal.split(":", 1)[1].split()[0])
    host = host_share(machine)
    if host is not None:
        parts.append(f"the host's cores slow {host:.0%} of the timed runs' time (median)")
    warmup = doc.get("broker_warmup")
    bulk = warmup.get("bulk") if isinstance(warmup, dict) else None
    rounds = bulk.get("rounds") if isinstance(bulk, dict) else None
    costs = [
        r["broker_us_per_msg"]
        for r in rounds or ()
        if isinstance(r, dict) and isinstance(r.get("broker_us_per_msg"), int | float)
    ]
    if costs:
        parts.append(
            "the broker's warm-up " + " / ".join(f"{c:.1f}" for c in costs) + " µs a message"
        )
    return ", ".join(parts)


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
    first: dict[Key, dict[str, Any]],
    second: dict[Key, dict[str, Any]],
    tolerance: float,
    behind: tuple[dict[Key, int], dict[Key, int]] = ({}, {}),
) -> list[dict[str, Any]]:
    """One row per key in both, in the first file's order; `counted` is False where the
    other system left items undelivered in either run (`behind`, the runs' `Run.behind`)."""
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
                "counted": key not in behind[0] and key not in behind[1],
            }
        )
    return rows


def _ratio(s: dict[str, Any]) -> str:
    return f"{s['median']:.2f}x ({s['min']:.2f}-{s['max']:.2f}, {s['n']} repeats)"


def _behind_text(key: Key, behind: tuple[dict[Key, int], dict[Key, int]]) -> str:
    counts = " and ".join(
        f"{b.get(key, 0):,} in the {label} run"
        for label, b in zip(("first", "second"), behind, strict=True)
    )
    return f"{key[0]} {key[1]} {key[2]}: {counts}"


def render(
    names: tuple[str, str],
    rows: list[dict[str, Any]],
    only: tuple[list[Key], list[Key]],
    tolerance: float,
    behind: tuple[dict[Key, int], dict[Key, int]] = ({}, {}),
) -> str:
    lines = [
        f"| scenario | case | ours vs | first run ({names[0]}) | second run ({names[1]}) "
        f"| change | within {tolerance:.0%} | in the first's range |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        scenario, case, vs = row["key"]
        delta = "n/a" if math.isnan(row["change"]) else f"{row['change']:+.1%}"
        verdict = ("yes" if row["within"] else "NO") if row["counted"] else "not counted"
        lines.append(
            f"| {scenario} | {case} | {vs} | {_ratio(row['first'])} | {_ratio(row['second'])} "
            f"| {delta} | {verdict} | {'yes' if row['in_range'] else 'no'} |"
        )
    counted = [r for r in rows if r["counted"]]
    within = sum(1 for r in counted if r["within"])
    in_range_count = sum(1 for r in counted if r["in_range"])
    lines.append("")
    lines.append(f"{within} of {len(counted)} ratios within {tolerance:.0%}.")
    lines.append(
        f"{in_range_count} of {len(counted)} second-run medians inside the first run's own "
        "range over its repeats."
    )
    left_out = [r for r in rows if not r["counted"]]
    if left_out:
        lines.append(
            f"Not counted ({len(left_out)}): the other system left measured items undelivered "
            "in a repeat, so its p99 is of the items it delivered and grows with the window: "
            + "; ".join(_behind_text(r["key"], behind) for r in left_out)
            + "."
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
    behind_both = (one.behind, two.behind)
    rows = compare(first, second, args.tolerance, behind_both)
    only = ([k for k in first if k not in second], [k for k in second if k not in first])
    print(render((one.started, two.started), rows, only, args.tolerance, behind_both))
    print(machines_note(one.cpu, two.cpu))
    print(state_note(one.state, two.state))
    print(host_note(one.host, two.host))
    if not any(r["counted"] for r in rows):
        print("bench.compare: the two runs share no ratio that counts", file=sys.stderr)
        return 2
    return 0 if all(r["within"] for r in rows if r["counted"]) else 1


def state_note(first: str, second: str) -> str:
    """Each run's machine state, as `machine_state` words it."""
    return (
        f"Machine state: the first run {first or 'not in its file'}; "
        f"the second run {second or 'not in its file'}."
    )


def host_note(first: float | None, second: float | None) -> str:
    """Whether the two runs met the host in the same state (bench/host.py): a CPU-bound
    process slows more in the slow mode than one that waits on round trips, so a ratio
    between two systems can follow the share."""
    if first is None or second is None:
        missing = [label for label, v in (("first", first), ("second", second)) if v is None]
        where = "either run" if len(missing) == 2 else f"the {missing[0]} run"
        return (
            f"Host state: not measured in {where} (files from before bench/host.py), so "
            "whether the host's cores ran as fast in both is not known."
        )
    if abs(first - second) <= HOST_TOLERANCE:
        return (
            f"Host state: the cores slow {first:.0%} and {second:.0%} of the timed runs' time "
            "(medians): the same state within "
            f"{HOST_TOLERANCE:.0%} points, so the pair compares like with like."
        )
    return (
        f"Host state differs: the cores slow {first:.0%} of the first run's timed runs' time and "
        f"{second:.0%} of the second's (medians): a ratio that follows the CPU's speed may "
        "have measured two states of the host rather than the method (bench/host.py)."
    )


if __name__ == "__main__":
    sys.exit(main())
