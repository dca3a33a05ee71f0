"""Child processes of a run: started with their own environment and log file, stopped by
SIGTERM (then SIGKILL) by their own pid only."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


class Child:
    def __init__(
        self, args: Sequence[str | Path], env: Mapping[str, str], log: Path, cwd: Path
    ) -> None:
        self.log = log
        self.args = [str(a) for a in args]
        log.parent.mkdir(parents=True, exist_ok=True)
        self._out = log.open("ab")
        self.proc = subprocess.Popen(
            self.args,
            env=dict(env),
            cwd=cwd,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 20.0) -> int:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._out.close()
        return self.proc.returncode

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def run(
    args: Sequence[str | Path],
    env: Mapping[str, str],
    log: Path,
    cwd: Path,
    timeout: float = 1800.0,
) -> str:
    """Run to completion; raise with the end of its log on failure. Returns stdout+stderr."""
    child = Child(args, env, log, cwd)
    started = time.monotonic()
    try:
        code = child.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        child.stop()
        raise RuntimeError(f"timed out after {timeout:.0f}s: {' '.join(child.args)}") from None
    child.stop()
    if code:
        raise RuntimeError(
            f"exit {code} after {time.monotonic() - started:.1f}s: {' '.join(child.args)}\n"
            f"{child.tail()}"
        )
    return log.read_text(errors="replace")


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system, every thread) the process has used, from /proc/<pid>/stat;
    None when it is gone. Independent of what else the machine runs."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat_cpu_seconds(stat)


def stat_cpu_seconds(stat: str) -> float:
    """User + system seconds from the text of a /proc/<pid>/stat."""
    # Fields after the command name (which may hold spaces) start at field 3 (state).
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def memory_mb(pid: int) -> tuple[float, float] | None:
    """(resident set now, its peak so far) in MiB, from /proc/<pid>/status (VmRSS, VmHWM);
    None when the process is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    try:
        return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024
    except (KeyError, ValueError):
        return None


def base_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"} and not k.startswith("PYTEST_")
    }
    env.update(extra)
    return env
