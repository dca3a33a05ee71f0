"""Probe ports with several processes on one host: a taken port stops the second worker or
consumer at once with one line that says what to do (no traceback); `--probe-port auto`
picks a free port and logs it."""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess

from {{ cookiecutter.package_name }}.container import Container

from ..support import service_env, spawn


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _reachable(port: int) -> bool:
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 2)
    except OSError:
        return False
    writer.close()
    return True


def _stopped(process: subprocess.Popen[bytes]) -> tuple[int, str]:
    _out, err = process.communicate(timeout=90)
    return process.returncode, err.decode()


async def test_a_second_worker_on_a_taken_probe_port_says_what_to_do(
    container: Container,
) -> None:
    port = _free_port()
    env = service_env(container, LOG_LEVEL="INFO")
    first = spawn(["worker", "--probe-port", str(port)], env)
    try:
        for _ in range(300):
            if await _reachable(port):
                break
            await asyncio.sleep(0.1)
        assert await _reachable(port)
        second = spawn(["worker", "--probe-port", str(port)], env)
        code, err = await asyncio.to_thread(_stopped, second)
    finally:
        first.terminate()
        first.communicate(timeout=60)
    assert code == 2, err[-2000:]
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("{{ cookiecutter.project_slug }}: ")]
    assert len(lines) == 1, err[-2000:]
    assert f"probe port {port} on 127.0.0.1 is taken" in lines[0]
    for hint in ("--probe-port N", "--probe-port auto", "--probe-port 0"):
        assert hint in lines[0]


async def test_a_consumer_on_a_bound_port_stops_and_auto_picks_a_free_one(
    container: Container, env_topics: str
) -> None:
    env = service_env(container, LOG_LEVEL="INFO", LOG_FORMAT="text")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        refused = spawn(["consumer", "--probe-port", str(taken)], env)
        code, err = await asyncio.to_thread(_stopped, refused)
        assert code == 2, err[-2000:]
        assert "Traceback" not in err
        assert f"probe port {taken} on 127.0.0.1 is taken" in err

        auto = spawn(["consumer", "--probe-port", "auto"], env)
        try:
            logged = ""
            for _ in range(300):
                await asyncio.sleep(0.1)
                if auto.poll() is not None:
                    break
                if await asyncio.to_thread(_has_probe_line, auto):
                    break
            auto.terminate()
            _out, rest = auto.communicate(timeout=60)
            logged = _seen.pop(id(auto), "") + rest.decode()
        finally:
            if auto.poll() is None:
                auto.kill()
    match = re.search(r"probes on http://127\.0\.0\.1:(\d+) ", logged)
    assert match, logged[-2000:]
    assert int(match.group(1)) not in (0, taken)


_seen: dict[int, str] = {}


def _has_probe_line(process: subprocess.Popen[bytes]) -> bool:
    """Read one stderr line of the process (blocking); True once the probe line is seen."""
    assert process.stderr is not None
    line = process.stderr.readline().decode()
    _seen[id(process)] = _seen.get(id(process), "") + line
    return "probes on http://" in line
