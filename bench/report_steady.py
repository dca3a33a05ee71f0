"""The report's steady section: commit-to-delivery latency per system and rate, and (from
bench/steady.py) how it was spread over the run's seconds and what the machine's CPU did."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .report_fmt import BASELINE, rounds_listed, summary
from .report_fmt import table as _table
from .systems import OWN_SYSTEMS, STEADY_ROUNDS


def render(steadies: list[dict[str, Any]], systems: list[str], meta: dict[str, Any]) -> list[str]:
    out: list[str] = []
    add = out.append
    add("## 2. Steady load: commit to delivery latency")
    add("")
    add(
        f"Paced transactions for {meta['duration']:.0f} s (after {meta['warmup']:.0f} s of "
        "warm-up that is not counted), one relay process. Latency per item = the time a "
        "consumer of the topic received it - the time COMMIT returned in the load process "
        "(same clock). That is commit -> Kafka delivery report plus one consumer fetch, so an "
        "upper bound of commit-to-ack. " + meta["tx_note"]
    )
    add("")
    rows = [
        [
            system,
            f"{rate:,}",
            summary((s["achieved_rate"] for s in mine), 0),
            summary((s["p50"] for s in mine), 1),
            summary((s["p95"] for s in mine), 1),
            summary((s["p99"] for s in mine), 1),
            summary((s["p99_first_third"] for s in mine), 1)
            + " / "
            + summary((s["p99_last_third"] for s in mine), 1),
            str(sum(s["undelivered"] for s in mine)),
            str(sum(s["duplicates"] for s in mine)),
            str(sum(s["order_violations"] for s in mine)),
        ]
        for rate, system, mine in _runs(steadies, systems)
    ]
    out += _table(
        [
            "system",
            "items/s",
            "achieved",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "p99 first / last third",
            "not delivered in time",
            "duplicates",
            "order violations",
        ],
        rows,
    )
    add("")
    out += _rounds(steadies, systems)
    add("![latency CDF](img/bench-latency-cdf.png)")
    add("")
    out += _by_second(steadies, systems)
    out += _split(steadies, systems)
    return out


def _rounds(steadies: list[dict[str, Any]], systems: list[str]) -> list[str]:
    """Every round's p99 of the runs made in rounds (bench/rounds.py), the kept one in bold;
    the table above and the ratios use the kept ones."""
    lines = []
    for rate, system, mine in _runs(steadies, systems):
        listed = rounds_listed(mine, "p99", ".1f")
        if listed:
            lines.append(f"- {system}, {rate:,}/s: {listed}")
    if not lines:
        return []
    made = max(len(s["rounds"]) for s in steadies if s.get("rounds"))
    once = [s for s in systems if s not in STEADY_ROUNDS]
    why_once = ""
    if len(once) == 1:
        why_once = f" {_named(once)} runs once: its p99 is set by its own polling."
    elif once:
        why_once = f" {_named(once)} run once: their p99 is set by their own polling."
    return [
        f"Rounds: each repeat runs {_named(STEADY_ROUNDS)} {made} times per rate (each from a "
        "fresh settled copy, interleaved across the systems, the repeat's order then "
        "reversed) and keeps the run with the median p99: a window's p99 is set by whichever "
        f"of the host's slow phases fall in it (bench/host.py), and the median of {made} "
        f"windows is steadier than one.{why_once} Every round's p99 ms per repeat (the kept "
        "one in bold; the table above shows the kept runs):",
        "",
        *lines,
        "",
    ]


def _named(names: tuple[str, ...] | list[str]) -> str:
    """Systems named in a sentence, from bench/systems.py rather than by hand: "the
    baseline", and two or more peers as "the peers"."""
    peers = [n for n in names if n not in OWN_SYSTEMS]
    words = [f"the {n}" if n == BASELINE else n for n in names if n in OWN_SYSTEMS]
    words += ["the peers"] if len(peers) > 1 else peers
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)


def _by_second(steadies: list[dict[str, Any]], systems: list[str]) -> list[str]:
    """Each run's p99 per second of commits, in three numbers, and its CPU per item."""
    rows = []
    for rate, system, mine in _runs(steadies, systems):
        worst = [s["worst_second"] for s in mine if s.get("worst_second")]
        if not worst:
            continue
        machines = [s["machine_cpu"] for s in mine if s.get("machine_cpu")]
        rows.append(
            [
                system,
                f"{rate:,}",
                " / ".join(f"{w['median_ms']:.1f}" for w in worst),
                " / ".join(f"{w['worst_ms']:.1f} (s {w['worst_at_s']})" for w in worst),
                " / ".join(str(w["seconds_over_2x"]) for w in worst),
                summary((s.get("cpu_us_per_msg") for s in mine), 1),
                summary((m["busy_pct"] for m in machines), 0),
                summary((m["all"] for m in machines), 1),
            ]
        )
    if not rows:
        return []
    out = [
        "The same runs second by second (every repeat, in order): the p99 of the items "
        "committed in each second of the measured window, as the median second's, the worst "
        "second's (and which second) and how many seconds were above twice the median's. A "
        "p99 made by one stall shows as one worst second far above a flat median; a run that "
        "is slower throughout, as a higher median. Then the relay process's CPU and the "
        "machine's (all cores' busy time, its share) per item over the whole load, warm-up "
        "included (bench/steady.py).",
        "",
    ]
    out += _table(
        [
            "system",
            "items/s",
            "median second's p99 ms",
            "worst second's p99 ms",
            "seconds > 2x median",
            "relay µs/item",
            "cores busy %",
            "all µs/item",
        ],
        rows,
    )
    out.append("")
    return out


def _split(steadies: list[dict[str, Any]], systems: list[str]) -> list[str]:
    """The same runs' latency cut at the produce call (bench/steady.py's `produce_split`),
    every repeat in order."""
    rows = []
    for rate, system, mine in _runs(steadies, systems):
        cuts = [s["produce_split"] for s in mine if s.get("produce_split")]
        if not cuts:
            continue
        rows.append(
            [
                system,
                f"{rate:,}",
                *(" / ".join(f"{c[key]:.1f}" for c in cuts) for key in _SPLIT_KEYS),
            ]
        )
    if not rows:
        return []
    out = [
        "The same runs cut where the relay handed each item to its Kafka client (the "
        "message's timestamp, which the producer takes when `produce()` is called), every "
        "repeat in order: commit -> produce is the relay's part (its wake-up, claim and "
        "build), produce -> reader the producer's batching, the broker and the reader's "
        "fetch. A tail made in the relay shows on the first side only; a busier machine "
        "slows both. The timestamp is in whole milliseconds, so the first part reads up to "
        "1 ms low and the second as much high, alike for every system. Not for "
        "ours-debezium, whose records carry the change event's time (bench/steady.py).",
        "",
    ]
    out += _table(
        [
            "system",
            "items/s",
            "commit -> produce p50 ms",
            "commit -> produce p99 ms",
            "produce -> reader p50 ms",
            "produce -> reader p99 ms",
        ],
        rows,
    )
    out.append("")
    return out


_SPLIT_KEYS = ("to_produce_p50", "to_produce_p99", "after_produce_p50", "after_produce_p99")


def _runs(
    steadies: list[dict[str, Any]], systems: list[str]
) -> Iterator[tuple[int, str, list[dict[str, Any]]]]:
    """(rate, system, that system's runs at that rate in repeat order), rates ascending,
    systems in the report's order; a system with no run at a rate is left out."""
    for rate in sorted({s["rate"] for s in steadies}):
        for system in systems:
            mine = [s for s in steadies if s["system"] == system and s["rate"] == rate]
            if mine:
                yield rate, system, mine
