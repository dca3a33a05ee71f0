"""The service's processes as a deployment runs them: api, two workers and two consumers
(`python -m <package>.cli ...`), each optionally inside a cgroup (for the network faults),
restarted when one exits on its own (counted), stopped with SIGTERM (SIGKILL after 30 s).
Also the fault commands a scenario runs (a server's stop/start command, from the
environment)."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from ..support import PROJECT_ROOT

PACKAGE = "{{ cookiecutter.package_name }}"
WORKERS = ("worker-0", "worker-1")
CONSUMERS = ("consumer-0", "consumer-1")


@dataclass
class Process:
    """One service process (`python -m <package>.cli ...`), optionally inside a cgroup."""

    name: str
    command: list[str]
    env: dict[str, str]
    log_path: Path
    cgroup: Path | None = None
    popen: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    exit_codes: list[int] = field(default_factory=list)

    def start(self) -> None:
        argv = [sys.executable, "-m", f"{PACKAGE}.cli", *self.command]
        if self.cgroup is not None:
            # The shell joins the cgroup, then becomes the service: every socket it opens
            # belongs to the cgroup, which is what the firewall rules of a fault match.
            argv = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self.cgroup), *argv]
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                argv,
                env=self.env,
                cwd=PROJECT_ROOT,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def exited(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def signal(self, sig: int) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(sig)

    def wait(self, timeout: float) -> int | None:
        if self.popen is None:
            return None
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def tail(self, lines: int = 15) -> str:
        try:
            text_lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text_lines[-lines:])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Stack:
    """api + 2 workers + 2 consumers, restarted like a deployment would restart them when
    one exits on its own (counted in `restarts`)."""

    def __init__(
        self,
        workdir: Path,
        env: dict[str, str],
        worker_env: Mapping[str, Mapping[str, str]] | None = None,
        cgroup: Path | None = None,
        cgroup_members: tuple[str, ...] = (),
        worker_args: tuple[str, ...] = (),
    ) -> None:
        self.api_port = free_port()
        self.probe_ports = {name: free_port() for name in WORKERS}
        self.processes: dict[str, Process] = {}
        specs: list[tuple[str, list[str]]] = [
            ("api", ["api", "--host", "127.0.0.1", "--port", str(self.api_port)]),
            *(
                (name, ["worker", "--probe-port", str(self.probe_ports[name]), *worker_args])
                for name in WORKERS
            ),
            *((name, ["consumer", "--probe-port", "0"]) for name in CONSUMERS),
        ]
        for name, command in specs:
            self.processes[name] = Process(
                name,
                command,
                {**env, **(worker_env or {}).get(name, {})},
                workdir / f"{name}.log",
                cgroup if name in cgroup_members else None,
            )
        self._stopping = False
        self._supervisor: asyncio.Task[None] | None = None

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def restarts(self) -> int:
        return sum(p.restarts for p in self.processes.values())

    async def start(self) -> None:
        for process in self.processes.values():
            process.start()
        self._supervisor = asyncio.create_task(self._supervise())
        await self._api_ready()

    async def _api_ready(self, within: float = 60.0) -> None:
        deadline = time.monotonic() + within
        last = "no answer"
        async with httpx.AsyncClient(timeout=5.0) as client:
            while time.monotonic() < deadline:
                try:
                    response = await client.get(f"{self.api_url}/readyz")
                    if response.status_code == 200:
                        return
                    last = f"{response.status_code} {response.text[:200]}"
                except httpx.HTTPError as exc:
                    last = f"{type(exc).__name__}: {exc}"
                await asyncio.sleep(0.3)
        raise AssertionError(f"api not ready within {within}s ({last})\n{self.tails()}")

    async def _supervise(self) -> None:
        while not self._stopping:
            for process in self.processes.values():
                code = process.exited()
                if code is not None and not self._stopping:
                    process.exit_codes.append(code)
                    process.restarts += 1
                    process.start()
            await asyncio.sleep(0.3)

    def kill(self, name: str) -> None:
        """SIGKILL and start again at once (no await in between, so the supervisor does not
        count it as a crash)."""
        process = self.processes[name]
        process.signal(signal.SIGKILL)
        process.wait(10)
        process.start()

    async def stop(self) -> None:
        self._stopping = True
        if self._supervisor is not None:
            await self._supervisor
        for process in self.processes.values():
            process.signal(signal.SIGTERM)
        for process in self.processes.values():
            if await asyncio.to_thread(process.wait, 30) is None:
                process.signal(signal.SIGKILL)
                await asyncio.to_thread(process.wait, 10)

    async def worker_health(self) -> str:
        """What each worker's /healthz (a lane that stopped turning shows there) and /readyz
        (PostgreSQL, Kafka) say."""
        answers = []
        async with httpx.AsyncClient(timeout=5.0) as client:
            for name, port in self.probe_ports.items():
                for path in ("healthz", "readyz"):
                    try:
                        response = await client.get(f"http://127.0.0.1:{port}/{path}")
                        text = f"{response.status_code} {response.text[:200]}"
                    except httpx.HTTPError as exc:
                        text = type(exc).__name__
                    answers.append(f"{name} /{path} {text}")
        return ", ".join(answers)

    def _log_lines(self) -> Iterator[tuple[str, list[str]]]:
        """Each process's name and log lines (a process whose log cannot be read left out)."""
        for process in self.processes.values():
            try:
                lines = process.log_path.read_text(errors="replace").splitlines()
            except OSError:
                continue
            yield process.name, lines

    def count_in_logs(self, text: str) -> dict[str, int]:
        """How many lines of each process's log contain `text` (processes with none left out)."""
        counts = {}
        for name, lines in self._log_lines():
            found = sum(text in line for line in lines)
            if found:
                counts[name] = found
        return counts

    def numbers_in_logs(self, pattern: str) -> int:
        """The sum, over every process's log lines that match `pattern`, of the integer its
        first group captured."""
        regex = re.compile(pattern)
        return sum(
            int(found.group(1))
            for _name, lines in self._log_lines()
            for found in map(regex.search, lines)
            if found
        )

    def tails(self) -> str:
        return "\n".join(
            f"--- {p.name} (exit codes {p.exit_codes}) ---\n{p.tail()}"
            for p in self.processes.values()
        )


def run_command(variable: str) -> None:
    """Run the command in environment variable `variable` (a fault's stop/start command)."""
    result = subprocess.run(
        shlex.split(os.environ[variable]), capture_output=True, text=True, timeout=180, check=False
    )
    assert result.returncode == 0, f"{variable} exited {result.returncode}: {result.stderr[-800:]}"
