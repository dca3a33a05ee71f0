"""Destructive commands on real PostgreSQL: they ask first (and refuse without a terminal),
work in batches with one audit row each, and an interrupted run resumes with --after-id
and changes every row exactly once."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import signal
import subprocess
import sys
import time
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.store.status import ItemStatus

from ..ops_support import TABLE, run_cli, snapshot
from ..support import OUTBOX_BOX, PROJECT_ROOT, OutboxItem, service_env

ROWS = 2_500


async def make_items(
    container: Container, n: int, status: ItemStatus, age_days: int = 0
) -> list[int]:
    """`n` new items in `status`, created `age_days` ago; returns their ids."""
    async with container.session_factory()() as session, session.begin():
        before = (await session.execute(text(f"SELECT coalesce(max(id), 0) FROM {TABLE}"))).scalar()
        await container.outbox().create_batch(
            session,
            OutboxItem,
            [{"event_key": str(i % 40), "event_name": "e", "payload": {"n": i}} for i in range(n)],
        )
        rows = await session.execute(
            text(
                f"UPDATE {TABLE} SET status = :s, errors_count = 3, "
                "created_at = now() - make_interval(days => :age), "
                "processed_at = CASE WHEN :done THEN now() END "
                "WHERE id > :before RETURNING id"
            ),
            {
                "s": int(status),
                "age": age_days,
                "before": before,
                "done": status in (ItemStatus.DELIVERED, ItemStatus.DISCARDED),
            },
        )
        return sorted(int(r[0]) for r in rows)


async def count(container: Container, status: ItemStatus) -> int:
    async with container.engine().connect() as conn:
        found = await conn.execute(
            text(f"SELECT count(*) FROM {TABLE} WHERE status = :s"), {"s": int(status)}
        )
        return int(found.scalar_one())


async def audit(container: Container, action: str) -> list[tuple[Any, ...]]:
    async with container.engine().connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT affected, detail, selection FROM outbox_audit WHERE action = :a ORDER BY id"
            ),
            {"a": action},
        )
        return [tuple(r) for r in rows]


async def test_without_yes_and_without_a_terminal_nothing_changes(container: Container) -> None:
    await make_items(container, 7, ItemStatus.FAILED)
    before = await snapshot(container)
    for args in (
        ("retry", "--box", OUTBOX_BOX),
        ("discard", "--box", OUTBOX_BOX),
        ("park", "--box", OUTBOX_BOX),
        ("replay", "--box", OUTBOX_BOX, "--id-range", "1:"),
    ):
        result = run_cli(*args, env=service_env(container))
        if args[0] == "replay":  # nothing delivered: nothing to confirm, nothing changed
            assert result.returncode == 0, result.stderr
            assert "changed 0 items" in result.stdout
            continue
        assert result.returncode == 2, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, lines
        assert f"{args[0]} will change 7 items of box {OUTBOX_BOX}." in lines[0]
        assert "pass --yes (-y) to confirm" in lines[0]
        assert result.stdout == ""
    assert await snapshot(container) == before
    assert await audit(container, "retry") == []
    assert [row[0] for row in await audit(container, "replay")] == [0]


def _on_a_terminal(args: list[str], env: dict[str, str], answer: bytes) -> tuple[int, str]:
    """Run the CLI with a pseudo-terminal as stdin and stderr (where the prompt goes)."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "{{ cookiecutter.package_name }}.cli", *args],
        env=env,
        cwd=PROJECT_ROOT,
        stdin=follower,
        stderr=follower,
        stdout=subprocess.PIPE,
    )
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 60
    while b"[y/N]" not in seen and time.monotonic() < deadline:
        seen += os.read(leader, 1024)
    os.write(leader, answer)
    out, _ = process.communicate(timeout=60)
    os.close(leader)
    return process.returncode, seen.decode() + out.decode()


async def test_the_prompt_shows_the_count_and_only_yes_changes(container: Container) -> None:
    await make_items(container, 4, ItemStatus.FAILED)
    env = service_env(container)
    code, output = await asyncio.to_thread(
        _on_a_terminal, ["retry", "--box", OUTBOX_BOX], env, b"n\n"
    )
    assert code == 1, output
    assert f"retry will change 4 items of box {OUTBOX_BOX}. [y/N]" in output
    assert await count(container, ItemStatus.FAILED) == 4
    code, output = await asyncio.to_thread(
        _on_a_terminal, ["retry", "--box", OUTBOX_BOX], env, b"y\n"
    )
    assert code == 0, output
    assert f"retry: changed 4 items of box {OUTBOX_BOX}" in output
    assert await count(container, ItemStatus.PENDING) == 4


async def test_yes_changes_every_row_in_batches_with_one_audit_row_each(
    container: Container,
) -> None:
    ids = await make_items(container, ROWS, ItemStatus.FAILED)
    result = run_cli(
        "retry", "--box", OUTBOX_BOX, "--yes", "--batch-size", "1000", env=service_env(container)
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 4, lines
    assert lines[0].startswith(f"retry {OUTBOX_BOX} batch 1: 1000 items (ids {ids[0]}-{ids[999]})")
    assert lines[2].endswith(f"{ROWS} of {ROWS} done")
    assert lines[3] == f"retry: changed {ROWS} items of box {OUTBOX_BOX} in 3 batches"
    assert await count(container, ItemStatus.PENDING) == ROWS
    rows = await audit(container, "retry")
    assert [r[0] for r in rows] == [1000, 1000, 500]
    assert [r[1] for r in rows] == [
        f"batch 1: ids {ids[0]}-{ids[999]}",
        f"batch 2: ids {ids[1000]}-{ids[1999]}",
        f"batch 3: ids {ids[2000]}-{ids[-1]}",
    ]
    assert all(r[2] == {"statuses": ["failed"]} for r in rows)


_WITH_CTRL_C = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'cli'; runpy.run_module('{{ cookiecutter.package_name }}.cli', run_name='__main__')"
)


def _interrupt_after_first_batch(args: list[str], env: dict[str, str]) -> tuple[int, str, str, str]:
    """Start the command, send SIGINT (Ctrl-C) once its first batch line is printed.

    The child starts with SIGINT's default action, as in a terminal: a test run started in
    the background of a script (`cmd &`) ignores SIGINT, every child inherits that, and
    Python then installs no KeyboardInterrupt handler at all."""
    process = subprocess.Popen(
        [sys.executable, "-c", _WITH_CTRL_C, *args],
        env=env,
        cwd=PROJECT_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    assert process.poll() is None, "the run ended before it could be interrupted"
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    return process.returncode, first, out, err


async def test_an_interrupted_run_prints_its_position_and_resumes_there(
    container: Container,
) -> None:
    await make_items(container, ROWS, ItemStatus.FAILED)
    env = service_env(container)
    # 1,000 rows a second: each batch of 1,000 takes a second, time to interrupt it.
    args = ["discard", "--box", OUTBOX_BOX, "--yes", "--batch-size", "1000", "--rate", "1000"]
    code, first, out, err = await asyncio.to_thread(_interrupt_after_first_batch, args, env)
    assert " batch 1: 1000 items" in first, (first, err)
    assert code == 130, (out, err)
    assert "Traceback" not in err
    match = re.search(r"stopped after id (\d+); resume with --after-id (\d+)", err)
    assert match, err
    position = int(match.group(1))
    done = await count(container, ItemStatus.DISCARDED)
    assert done in (1000, 2000)  # whole batches only
    assert sum(r[0] for r in await audit(container, "discard")) == done
    async with container.engine().connect() as conn:
        highest = await conn.execute(
            text(f"SELECT max(id) FROM {TABLE} WHERE status = :s"),
            {"s": int(ItemStatus.DISCARDED)},
        )
        assert highest.scalar_one() == position

    result = run_cli(*args[:-2], "--after-id", str(position), env=env)
    assert result.returncode == 0, result.stderr
    assert f"discard: changed {ROWS - done} items of box {OUTBOX_BOX}" in result.stdout
    assert await count(container, ItemStatus.DISCARDED) == ROWS
    assert await count(container, ItemStatus.FAILED) == 0
    rows = await audit(container, "discard")
    assert sum(r[0] for r in rows) == ROWS
    resumed = [r for r in rows if r[2].get("after_id") == position]
    assert sum(r[0] for r in resumed) == ROWS - done


async def test_purge_deletes_in_batches_and_asks_first(container: Container) -> None:
    await make_items(container, ROWS, ItemStatus.DELIVERED, age_days=30)
    await make_items(container, 3, ItemStatus.DELIVERED)  # recent: kept
    env = service_env(container)
    refused = run_cli("purge", "--box", OUTBOX_BOX, env=env)
    assert refused.returncode == 2
    assert f"purge will delete {ROWS} items ({ROWS} of box {OUTBOX_BOX})." in refused.stderr
    assert await count(container, ItemStatus.DELIVERED) == ROWS + 3
    dry = run_cli("purge", "--box", OUTBOX_BOX, "--dry-run", env=env)
    assert dry.stdout.strip() == f"dry run: purge would delete {ROWS} items of box {OUTBOX_BOX}"
    result = run_cli("purge", "--box", OUTBOX_BOX, "--yes", "--batch-size", "1000", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(" batch ") == 3
    assert f"purge {OUTBOX_BOX}: deleted {ROWS} delivered" in result.stdout
    assert await count(container, ItemStatus.DELIVERED) == 3
    assert [r[0] for r in await audit(container, "purge")] == [1000, 1000, 500]


class Proxy:
    """A TCP proxy to PostgreSQL that the test can cut: a database outage in mid-run."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self.writers += [writer, up_writer]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, RuntimeError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def cut(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.transport.abort()
        await self.server.wait_closed()


def _start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "{{ cookiecutter.package_name }}.cli", *args],
        env=env,
        cwd=PROJECT_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def test_an_outage_in_mid_run_is_one_line_with_the_resume_position(
    container: Container,
) -> None:
    await make_items(container, ROWS, ItemStatus.FAILED)
    real = make_url(container.settings().database_url)
    proxy = Proxy(real.host or "127.0.0.1", real.port or 5432)
    port = await proxy.start()
    url = real.set(host="127.0.0.1", port=port).render_as_string(hide_password=False)
    args = ["park", "--box", OUTBOX_BOX, "--yes", "--batch-size", "1000", "--rate", "1000"]
    process = await asyncio.to_thread(_start, args, service_env(container, DATABASE_URL=url))
    assert process.stdout is not None
    first = await asyncio.to_thread(process.stdout.readline)
    await proxy.cut()
    out, err = await asyncio.to_thread(process.communicate, timeout=90)
    assert " batch 1: 1000 items" in first, (first, err)
    assert process.returncode == 3, (out, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    assert "PostgreSQL at " in lines[0]
    match = re.search(r"stopped after id (\d+); resume with --after-id (\d+)$", lines[0])
    assert match, lines[0]
    done = await count(container, ItemStatus.PARKED)
    assert done in (1000, 2000)
    assert sum(r[0] for r in await audit(container, "park")) == done
    resumed = run_cli(*args[:-2], "--after-id", match.group(1), env=service_env(container))
    assert resumed.returncode == 0, resumed.stderr
    assert await count(container, ItemStatus.PARKED) == ROWS
    assert sum(r[0] for r in await audit(container, "park")) == ROWS
