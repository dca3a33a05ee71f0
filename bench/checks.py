"""What must hold in every run for ours (worker and Debezium) and the baseline (peers are
only reported): nothing lost, no per-key order violation, no inbox row stored twice, every
timed run settled."""

from __future__ import annotations

from typing import Any

from .rounds import all_runs
from .sizes import Sizes
from .systems import OWN_SYSTEMS


def correctness(results: dict[str, list[dict[str, Any]]], sizes: Sizes) -> list[str]:
    failures = []
    # Every round of a drain (bench/rounds.py), not only the one kept for the ratios.
    for d in all_runs(results.get("drain", [])):
        if d["system"] in OWN_SYSTEMS:
            if not d["complete"]:
                failures.append(
                    f"drain {d['system']} w{d['workers']}: {d['delivered']}/{sizes.backlog} delivered"
                )
            if d["order_violations"] or d["keyless"]:
                failures.append(
                    f"drain {d['system']} w{d['workers']}: {d['order_violations']} order "
                    f"violations, {d['keyless']} keyless"
                )
        for problem in d["problems"]:
            failures.append(f"drain {d['system']} w{d['workers']}: {problem}")
    for s in all_runs(results.get("steady", [])):
        if s["system"] in OWN_SYSTEMS and (s["undelivered"] or s["order_violations"]):
            failures.append(
                f"steady {s['system']} {s['rate']}/s: {s['undelivered']} undelivered, "
                f"{s['order_violations']} order violations"
            )
        for problem in s["problems"]:
            failures.append(f"steady {s['system']} {s['rate']}/s: {problem}")
    for i in all_runs(results.get("inbox", [])):
        if i["lost"] or i["stored_duplicates"]:
            failures.append(
                f"inbox {i['system']}: lost {i['lost']}, stored twice {i['stored_duplicates']}"
            )
        for problem in i.get("problems", []):
            failures.append(f"inbox {i['system']}: {problem}")
    for c in results.get("create_cost", []):
        for problem in c.get("problems", []):
            failures.append(f"cost {c['system']}: {problem}")
    for r in results.get("scale", []):
        if r["lost"] or r["order_violations"] or r["unsettled"] or not r["complete"]:
            failures.append(
                f"scale {r['system']}: lost {r['lost']}, {r['order_violations']} order "
                f"violations, {r['unsettled']} changes not settled within 30 s"
            )
        for problem in r["problems"]:
            failures.append(f"scale {r['system']}: {problem}")
    for g in results.get("growth", []):
        case = f"growth {g['system']} {g['case']}"
        if not g["complete"] or g["order_violations"] or g["keyless"]:
            failures.append(
                f"{case}: {g['delivered']}/{sizes.backlog} delivered, "
                f"{g['order_violations']} order violations, {g['keyless']} keyless"
            )
        if g["rows_before"] != g["rows"]:
            failures.append(f"{case}: the table held {g['rows_before']:,} delivered rows")
        if g["purging"] and g["purged"] <= 0:
            failures.append(f"{case}: retention purged nothing while it was to purge")
        if not g["purging"] and g["purged"]:
            failures.append(f"{case}: {g['purged']:,} kept rows were deleted")
        if g.get("range_scan") is False:
            failures.append(f"{case}: the claim's plan is not an index range scan")
        for problem in g["problems"]:
            failures.append(f"{case}: {problem}")
    for m in results.get("memory", []):
        if m["left_pending"] or m["lost"] or m["stored_duplicates"]:
            failures.append(
                f"memory {m['system']}: {m['left_pending']} left pending, lost {m['lost']}, "
                f"stored twice {m['stored_duplicates']}"
            )
        for problem in m["problems"]:
            failures.append(f"memory {m['system']}: {problem}")
    for x in results.get("mixed", []):
        if x["relay_undelivered"] or x["inbox_unhandled"] or x["api_errors"]:
            failures.append(
                f"mixed {x['system']}: {x['api_errors']} api errors, {x['relay_undelivered']} "
                f"orders not relayed, {x['inbox_unhandled']} payments not handled"
            )
        for problem in x["problems"]:
            failures.append(f"mixed {x['system']}: {problem}")
    for r in results.get("idle", []):
        for problem in r["problems"]:
            failures.append(f"idle {r['system']}: {problem}")
    for key, rows in results.items():
        for r in all_runs(rows):
            settled = r.get("settle", {})
            if settled.get("checkpoint") != 1 or settled.get("vacuum_analyze") != 1:
                failures.append(f"{key} {r['system']}: run was not settled before timing")
    return failures
