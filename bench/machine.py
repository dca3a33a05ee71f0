"""Machine facts for the results, and waiting for a quiet machine."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import time
from pathlib import Path

from .envs import log


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def ram_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return float("nan")


def kafka_pid() -> int | None:
    """The broker's process id (changes when someone restarts the shared broker)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"kafka.Kafka" in cmdline.read_bytes():
                return int(cmdline.parent.name)
        except (OSError, ValueError):
            continue
    return None


def kafka_version() -> str:
    """The running broker's version, from its class path (kafka-<version>/libs)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "kafka.Kafka" in text:
            match = re.search(r"kafka[-_](\d+\.\d+\.\d+)", text)
            if match:
                return match.group(1)
    return os.environ.get("OUTBOX_KAFKA_VERSION", "unknown")


def python_version(python: str) -> str:
    out = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() or "unknown"


def load1() -> float:
    return os.getloadavg()[0]


def wait_for_quiet(
    threshold: float, max_minutes: float, poll_seconds: float = 30.0
) -> tuple[bool, float]:
    """Wait until the 1-minute load average is below `threshold`; (quiet, load at the end)."""
    deadline = time.monotonic() + max_minutes * 60
    while True:
        load = load1()
        if load < threshold:
            log(f"load average {load:.2f} < {threshold}: starting")
            return True, load
        if time.monotonic() >= deadline:
            log(f"load average still {load:.2f} after {max_minutes:.0f} min: running anyway")
            return False, load
        log(f"load average {load:.2f} >= {threshold}; waiting {poll_seconds:.0f}s")
        time.sleep(poll_seconds)
