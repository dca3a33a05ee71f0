"""Which systems run, and their environments: the baked project (ours), the same project
with its outbox box relayed by Debezium (ours-debezium, unless --no-debezium), the peers from
the package index (each in its own venv), and the raw baseline (the bench's own venv)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .debezium import boxes_file
from .envs import PEERS, bake_project, cache_dir, log, make_venv, versions
from .systems import OURS_DEBEZIUM, System

PEER_DRIVERS = {
    "faststream-outbox": ("faststream_outbox_driver.py", ["faststream", "confluent-kafka"]),
    "omni-box": ("omnibox_driver.py", ["aiokafka"]),
}


def chosen_peers(args: argparse.Namespace) -> list[str]:
    chosen = args.peers if args.peers is not None else ("" if args.quick else ",".join(PEERS))
    peers = [p.strip() for p in chosen.split(",") if p.strip() and p.strip() != "none"]
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        raise SystemExit(f"--peers: unknown {unknown}; choose from {', '.join(PEERS)} or none")
    return peers


def build_systems(
    args: argparse.Namespace, workdir: Path, services: dict[str, str]
) -> list[System]:
    log("baking the default project and installing it")
    project = bake_project(workdir)
    ours = System("ours", project.python, "ours.py", services, project=project, inbox=True)
    ours.versions = {"order-service (baked)": "template HEAD"}
    systems = [ours]
    if args.debezium:
        connect = os.environ.get("TEST_CONNECT_URL")
        if not connect:
            raise SystemExit(
                "--debezium: TEST_CONNECT_URL is not set (bench/run.sh starts Connect)"
            )
        debezium = System(
            OURS_DEBEZIUM,
            project.python,
            "ours_debezium.py",
            {**services, "CONNECT_URL": connect},
            project=project,
            boxes_file=boxes_file(project, workdir),
        )
        debezium.versions = {"order-service (baked)": "template HEAD, relay: debezium"}
        systems.append(debezium)
    for peer in chosen_peers(args):
        log(f"installing {peer} into its own venv")
        python = make_venv(cache_dir() / "venvs" / peer, PEERS[peer])
        driver, related = PEER_DRIVERS[peer]
        system = System(peer, python, driver, services)
        system.versions = versions(python, [peer, *related])
        systems.append(system)
    bench_python = Path(sys.executable)
    baseline = System("baseline", bench_python, "baseline.py", services, inbox=True)
    baseline.versions = versions(bench_python, ["asyncpg", "confluent-kafka"])
    systems.append(baseline)
    return systems
