"""The faults the scenarios inject, and the checks that say whether one can be injected
here (each returns None when it can, else the precise reason to skip)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
from confluent_kafka.admin import AdminClient
from sqlalchemy import text

from ..support import InboxItem, OutboxItem
from .load import EXAMPLE_DOMAIN
from .queries import count, wait_until
from .scenarios import Run
from .supervise import run_command

Fault = Callable[[Run], Awaitable[None]]

KAFKA_CONTROL = ("TEST_KAFKA_STOP_CMD", "TEST_KAFKA_START_CMD")
PG_CONTROL = ("TEST_PG_STOP_CMD", "TEST_PG_START_CMD")


def missing(variables: tuple[str, ...]) -> str | None:
    unset = [v for v in variables if not os.environ.get(v)]
    if not unset:
        return None
    return (
        f"set {' and '.join(unset)} to commands that stop and start the test server "
        "(scripts/test.sh of the template sets them for its own services)"
    )


# -- process kills ---------------------------------------------------------------------------


async def kill_worker(run: Run) -> None:
    run.stack.kill("worker-0")
    run.notes.append("SIGKILL worker-0 while it relayed")


async def kill_consumer(run: Run) -> None:
    await _inbox_stored_at_least(run, 300, within=60)
    run.stack.kill("consumer-0")
    run.notes.append("SIGKILL consumer-0 while it stored")


async def _inbox_stored_at_least(run: Run, n: int, within: float) -> None:
    async def stored() -> bool:
        return await count(run.container, InboxItem) >= n

    await wait_until(stored, within=within, interval=0.1)


# -- servers stopped and started --------------------------------------------------------------


def outage(stop: str, start: str, seconds: float, what: str) -> Fault:
    async def fault(run: Run) -> None:
        await asyncio.to_thread(run_command, stop)
        down = time.monotonic()
        try:
            await asyncio.sleep(seconds)
        finally:
            await asyncio.to_thread(run_command, start)
            run.notes.append(f"{what} down {time.monotonic() - down:.0f}s (restart included)")

    return fault


# -- the network towards Kafka ----------------------------------------------------------------


@dataclass(frozen=True)
class NetworkSandbox:
    """A cgroup whose processes' packets to the brokers a firewall rule can drop; the
    other processes (and the test itself) keep their connections."""

    cgroup: Path
    relative: str
    brokers: tuple[tuple[str, int], ...]

    def rule(self, host: str, port: int, loss: float | None) -> list[str]:
        rule = ["OUTPUT", "-p", "tcp", "-d", host, "--dport", str(port)]
        rule += ["-m", "cgroup", "--path", self.relative]
        if loss is not None:
            rule += ["-m", "statistic", "--mode", "random", "--probability", f"{loss:.2f}"]
        return [*rule, "-j", "DROP"]

    def remove(self) -> None:
        for _ in range(50):
            try:
                self.cgroup.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:  # processes still leaving
                time.sleep(0.1)


def _cgroup2_root() -> Path | None:
    with open("/proc/mounts") as mounts:
        for line in mounts:
            parts = line.split()
            if len(parts) > 2 and parts[2] == "cgroup2":
                return Path(parts[1])
    return None


def _iptables(action: str, rule: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["iptables", "-w", "5", action, *rule], capture_output=True, text=True, check=False
    )


def brokers(bootstrap: str) -> tuple[tuple[str, int], ...]:
    """Every broker address clients connect to (bootstrap and advertised), as IPs."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=15)
    addresses = {(str(b.host), int(b.port)) for b in metadata.brokers.values()}
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        addresses.add((host, int(port)))
    return tuple(sorted({(socket.gethostbyname(h), p) for h, p in addresses}))


def network_sandbox(bootstrap: str) -> NetworkSandbox | str:
    """The sandbox, or why it cannot be had here."""
    if sys.platform != "linux":
        return "needs Linux (cgroup v2 and iptables' cgroup match)"
    if os.geteuid() != 0:
        return "needs root: it adds iptables rules and creates a cgroup"
    if shutil.which("iptables") is None:
        return "needs the iptables command"
    root = _cgroup2_root()
    if root is None:
        return "needs a mounted cgroup v2 hierarchy (none in /proc/mounts)"
    cgroup = root / f"guarantees-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    try:
        cgroup.mkdir()
    except OSError as exc:
        return f"cannot create a cgroup under {root}: {exc}"
    sandbox = NetworkSandbox(cgroup, f"/{cgroup.name}", brokers(bootstrap))
    probe = sandbox.rule(*sandbox.brokers[0], loss=None)
    added = _iptables("-I", probe)
    if added.returncode != 0:
        sandbox.remove()
        return f"iptables cannot match on cgroups here: {added.stderr.strip()}"
    _iptables("-D", probe)
    return sandbox


def network_trouble(sandbox: NetworkSandbox, drop_seconds: float, lossy_seconds: float) -> Fault:
    """Every packet towards the brokers dropped, then 30% of them (retransmission delays)."""

    async def fault(run: Run) -> None:
        for loss, seconds in ((None, drop_seconds), (0.3, lossy_seconds)):
            rules = [sandbox.rule(host, port, loss) for host, port in sandbox.brokers]
            for rule in rules:
                added = _iptables("-I", rule)
                assert added.returncode == 0, added.stderr
            try:
                await asyncio.sleep(seconds)
            finally:
                for rule in rules:
                    _iptables("-D", rule)
        run.notes.append(
            f"worker-0, consumer-0: packets to Kafka dropped {drop_seconds:.0f}s, "
            f"then 30% lost {lossy_seconds:.0f}s"
        )

    return fault


# -- a full disk ---------------------------------------------------------------------------------

DISK_FULL_FUNCTION = """
CREATE OR REPLACE FUNCTION guarantee_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'could not extend file: No space left on device (injected)'
    USING ERRCODE = 'disk_full';
END $$
"""


def disk_full(seconds: float) -> Fault:
    """Inserts into the outbox and inbox tables fail with SQLSTATE 53100 for `seconds`; with
    the example domain, order requests made meanwhile must get a clear 503."""
    tables = (OutboxItem.__tablename__, InboxItem.__tablename__)

    async def fault(run: Run) -> None:
        async with run.container.engine().begin() as conn:
            await conn.execute(text(DISK_FULL_FUNCTION))
            for table in tables:
                await conn.execute(
                    text(
                        f"CREATE TRIGGER guarantee_disk_full BEFORE INSERT ON {table} "
                        "FOR EACH STATEMENT EXECUTE FUNCTION guarantee_disk_full()"
                    )
                )
        try:
            await asyncio.sleep(seconds / 2)
            if EXAMPLE_DOMAIN:
                await _orders_while_full(run)
            await asyncio.sleep(seconds / 2)
        finally:
            async with run.container.engine().begin() as conn:
                for table in tables:
                    await conn.execute(text(f"DROP TRIGGER guarantee_disk_full ON {table}"))
        run.notes.append(f"inserts into {', '.join(tables)} failed with 53100 for {seconds:.0f}s")

    return fault


async def _orders_while_full(run: Run) -> None:
    async with httpx.AsyncClient(base_url=run.stack.api_url, timeout=30.0) as client:
        answers = [
            await client.post("/orders", json={"customer_id": f"full{n}", "amount": "1.00"})
            for n in range(5)
        ]
    clear = [a for a in answers if a.status_code == 503 and "disk_full" in _detail(a)]
    run.facts["api_requests_while_full"] = len(answers)
    run.facts["api_clear_503"] = len(clear)
    sample = answers[0]
    run.notes.append(f"api while full: {sample.status_code} {sample.text[:120]}")


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    return str(body.get("detail", "")) if isinstance(body, dict) else ""


# -- clocks ----------------------------------------------------------------------------------------

SKEWED_CLOCK = Path(__file__).resolve().parent / "skewed_clock"


def skewed_clock(offset_seconds: float) -> dict[str, str] | str:
    """Environment that runs a service process with its wall clock `offset_seconds` off (see
    skewed_clock/sitecustomize.py), or why that is not possible here."""
    path = os.pathsep.join(filter(None, [str(SKEWED_CLOCK), os.environ.get("PYTHONPATH")]))
    env = {"PYTHONPATH": path, "GUARANTEES_CLOCK_OFFSET_SECONDS": str(offset_seconds)}
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import datetime, time; print(time.time()); "
            "print(datetime.datetime.now(datetime.timezone.utc).timestamp())",
        ],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        skews = [float(line) - time.time() for line in probe.stdout.split()]
    except ValueError:
        return f"the skewed interpreter did not run: {probe.stderr.strip()[:300]}"
    if len(skews) != 2 or any(abs(skew - offset_seconds) > 60 for skew in skews):
        return f"PYTHONPATH={SKEWED_CLOCK} did not move the clock by {offset_seconds}s: {skews}"
    return env
