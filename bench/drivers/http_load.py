"""Paced HTTP load (stdlib only, runs in the bench venv): POST /orders at `--rate` requests a
second for `--duration` seconds over `--connections` keep-alive HTTP/1.1 connections.

A request is due at start + n / rate. Its latency is counted from the time it was due, not
from when a connection became free, so a server that falls behind shows it in the latency
instead of quietly lowering the rate (no coordinated omission). Writes
{"elapsed": s, "requests": [[due, done, status, order id or null], ...]} (wall clock) to
`--out`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _post(conn: Connection, host: str, path: str, body: bytes) -> tuple[int, bytes]:
    reader, writer = conn
    writer.write(
        b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (path.encode(), host.encode(), len(body), body)
    )
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return status, (await reader.readexactly(length) if length else b"")


async def run(args: argparse.Namespace) -> None:
    free: asyncio.Queue[Connection] = asyncio.Queue()
    for _ in range(args.connections):
        free.put_nowait(await asyncio.open_connection(args.host, args.port))
    done: list[tuple[float, float, int, int | None]] = []

    async def one(n: int, due: float) -> None:
        conn = await free.get()
        body = json.dumps({"customer_id": f"c-{n}", "amount": "12.50"}).encode()
        try:
            status, data = await _post(conn, args.host, args.path, body)
        except (OSError, ValueError, IndexError, asyncio.IncompleteReadError):
            status, data = 0, b""
            conn[1].close()
            conn = await asyncio.open_connection(args.host, args.port)
        free.put_nowait(conn)
        order_id = json.loads(data).get("id") if status == 201 else None
        done.append((due, time.time(), status, order_id))

    interval = 1.0 / args.rate
    total = round(args.rate * args.duration)
    tasks = []
    started, wall = time.monotonic(), time.time()
    for n in range(total):
        delay = started + n * interval - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(n, wall + n * interval)))
    await asyncio.gather(*tasks)
    elapsed = time.monotonic() - started
    while not free.empty():
        free.get_nowait()[1].close()
    args.out.write_text(json.dumps({"elapsed": elapsed, "requests": done}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", default="/orders")
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--out", type=Path, required=True)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
