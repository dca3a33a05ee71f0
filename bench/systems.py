"""The systems under test and how to drive each: the baked project, the peers, the baseline.

Every system is driven through the same verbs (a driver script in drivers/ run by the
system's own venv): `schema`, `fill` (a backlog through its public create API), `load`
(paced transactions) and `relay` (its relay process, run until SIGTERM). Ours uses its
console script for the relay (`<slug> worker`) and the inbox (`<slug> consumer`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .envs import DRIVERS, Project

PLACEHOLDER_TOPIC = "bench-placeholder"
OURS_DEBEZIUM = "ours-debezium"
# Not peers: ours (the worker), ours relayed by Debezium, and the raw baseline.
OWN_SYSTEMS = ("ours", OURS_DEBEZIUM, "baseline")
# The systems whose steady runs are made in rounds (bench/registry.py says why not the rest).
STEADY_ROUNDS = ("ours", "baseline")


@dataclass
class System:
    name: str
    python: Path
    driver: str
    services: dict[str, str]
    project: Project | None = None
    inbox: bool = False
    # The baked project with its outbox box `relay: debezium` (bench/debezium.py): this
    # boxes file, and Kafka Connect at services["CONNECT_URL"] instead of a relay process.
    boxes_file: Path | None = None
    notes: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)

    # -- environment ----------------------------------------------------------------------

    def env(
        self, database_url: str, topic: str = PLACEHOLDER_TOPIC, **extra: str
    ) -> dict[str, str]:
        env = {
            **self.services,
            "DATABASE_URL": database_url,
            "OTEL_SDK_DISABLED": "true",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
            **extra,
        }
        if self.project is not None:
            env.update(
                {
                    "BENCH_PACKAGE": self.project.package,
                    self.project.outbox_topic_env: topic,
                    "SERVICE_NAME": f"bench-{uuid.uuid4().hex[:8]}",
                    "WORKER_PROBE_PORT": "0",
                    "CONSUMER_PROBE_PORT": "0",
                }
            )
        if self.boxes_file is not None:
            env["BOXES_FILE"] = str(self.boxes_file)
        return env

    @property
    def debezium(self) -> bool:
        return self.boxes_file is not None

    def driver_cmd(self, verb: str, *args: str) -> list[str]:
        command = [str(self.python), str(DRIVERS / self.driver), verb, *args]
        if self.project is not None:
            command += ["--box", self.project.outbox_box]
        return command

    # -- verbs ----------------------------------------------------------------------------

    def schema_cmds(self) -> list[list[str]]:
        if self.project is not None:
            return [[str(self.project.script), "migrate"]]
        return [self.driver_cmd("schema")]

    def fill_cmd(self, count: int, keys: int, size: int) -> list[str]:
        return self.driver_cmd(
            "fill",
            "--count",
            str(count),
            "--keys",
            str(keys),
            "--size",
            str(size),
            "--topic",
            PLACEHOLDER_TOPIC,
        )

    def load_cmd(
        self,
        start: int,
        tx_rate: float,
        per_tx: int,
        duration: float,
        keys: int,
        size: int,
        out: Path,
    ) -> list[str]:
        return self.driver_cmd(
            "load",
            "--start",
            str(start),
            "--tx-rate",
            str(tx_rate),
            "--per-tx",
            str(per_tx),
            "--duration",
            str(duration),
            "--keys",
            str(keys),
            "--size",
            str(size),
            "--out",
            str(out),
            "--topic",
            PLACEHOLDER_TOPIC,
        )

    def relay_cmd(self, topic: str) -> list[str]:
        if self.project is not None:
            return [str(self.project.script), "worker", "--box", self.project.outbox_box]
        return [str(self.python), str(DRIVERS / self.driver), "relay", "--topic", topic]

    def create_cost_cmd(self, seconds: float, rounds: int, size: int) -> list[str]:
        return self.driver_cmd(
            "create-cost",
            "--seconds",
            str(seconds),
            "--rounds",
            str(rounds),
            "--size",
            str(size),
            "--topic",
            PLACEHOLDER_TOPIC,
        )

    def inbox_cmd(self, topic: str) -> tuple[list[str], dict[str, str]]:
        if self.project is not None:
            return (
                [str(self.project.script), "consumer", "--box", self.project.inbox_box],
                {self.project.inbox_topic_env: topic},
            )
        return (
            [str(self.python), str(DRIVERS / self.driver), "inbox", "--topic", topic],
            {"BENCH_GROUP": f"bench-baseline-{uuid.uuid4().hex[:8]}"},
        )

    def outbox_table(self) -> str:
        if self.project is not None:
            return self.project.outbox_box + "s"
        return "baseline_outbox"

    def inbox_table(self) -> str:
        if self.project is not None:
            return self.project.inbox_box.removesuffix("_item") + "_items"
        return "baseline_inbox"


def ours_worker_or_baseline(system: System) -> bool:
    """Ours relayed by its worker, or the baseline: the systems with a relay process and an
    inbox consumer of their own (idle, growth, memory). The peers have no inbox consumer to
    pair with their relay, and ours-debezium relays from the WAL, not by claiming rows."""
    return not system.debezium and (system.project is not None or system.name == "baseline")
