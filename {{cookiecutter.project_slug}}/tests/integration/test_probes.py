from __future__ import annotations

import asyncio

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.observability.probes import ProbeServer

from ..support import make_registry, running_worker


async def http_get(port: int, path: str) -> tuple[int, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    response = (await reader.read()).decode()
    writer.close()
    status = int(response.split()[1])
    return status, response.split("\r\n\r\n", 1)[1]


async def test_worker_probes_report_liveness_and_readiness(container: Container) -> None:
    async with running_worker(container, make_registry()) as worker:
        probes = ProbeServer(
            0, worker.liveness, worker.readiness, lambda: b"metric_total 1\n", host="127.0.0.1"
        )
        await probes.start()
        port = probes.port
        assert port, "the probe server did not bind"
        try:
            assert await http_get(port, "/healthz") == (
                200,
                f"ok: {worker.concurrency * len(worker.boxes)} lanes",
            )
            status, body = await http_get(port, "/readyz")
            assert status == 200
            assert body.startswith("ok: ")
            assert await http_get(port, "/metrics") == (200, "metric_total 1\n")
            assert (await http_get(port, "/nope"))[0] == 404
        finally:
            await probes.close()


async def test_a_stalled_worker_fails_liveness(container: Container) -> None:
    async with running_worker(container, make_registry()) as worker:
        assert worker.liveness(stall_seconds=60)[0] is True
        await asyncio.sleep(0.3)
        alive, detail = worker.liveness(stall_seconds=0.0)
        assert alive is False
        assert detail.startswith("lanes stalled: ")
