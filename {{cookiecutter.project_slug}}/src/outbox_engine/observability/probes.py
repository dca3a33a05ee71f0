"""A tiny HTTP endpoint for worker and consumer processes: `/healthz` (alive: the main loop
is turning), `/readyz` (connected and working) and, when telemetry is on, `/metrics`
(Prometheus text format). Orchestrators restart a process whose liveness fails.

A port another process holds (a second worker on one host) is `ProbePortTaken`, whose
message says what to do; port 0 picks a free port (the log line names it).
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

Check = Callable[[], tuple[bool, str]]


class ProbePortTaken(RuntimeError):
    """The probe port is in use (or not allowed) on this host."""

    def __init__(self, host: str, port: int, reason: str) -> None:
        super().__init__(
            f"probe port {port} on {host} is {reason} (another worker or consumer on this "
            "host?); pass --probe-port N for another port, --probe-port auto to pick a free "
            "one (logged), or --probe-port 0 to turn the probes off"
        )
        self.host = host
        self.port = port


class ProbeServer:
    def __init__(
        self,
        port: int | None,
        alive: Check,
        ready: Check,
        metrics: Callable[[], bytes] | None = None,
        host: str = "0.0.0.0",
    ) -> None:
        self.port = port
        self.host = host
        self.alive = alive
        self.ready = ready
        self.metrics = metrics
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        """Listen on `port` (0: any free port; None: no probes)."""
        if self.port is None:
            return
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.port)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ProbePortTaken(self.host, self.port, "taken") from None
            if exc.errno == errno.EACCES:
                raise ProbePortTaken(self.host, self.port, "not allowed (privileged)") from None
            raise
        sockets = self._server.sockets or ()
        self.port = sockets[0].getsockname()[1] if sockets else self.port
        log.info(
            "probes on http://%s:%d (/healthz, /readyz%s)",
            self.host,
            self.port,
            ", /metrics" if self.metrics else "",
        )

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), 5)
            while (await asyncio.wait_for(reader.readline(), 5)) not in (b"\r\n", b"\n", b""):
                pass
            parts = request.decode("latin-1").split()
            path = parts[1].split("?")[0] if len(parts) >= 2 else ""
            status, content_type, body = self._respond(path)
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + body)
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()

    def _respond(self, path: str) -> tuple[str, str, bytes]:
        if path in ("/healthz", "/readyz"):
            ok, detail = (self.alive if path == "/healthz" else self.ready)()
            return ("200 OK" if ok else "503 Service Unavailable", "text/plain", detail.encode())
        if path == "/metrics" and self.metrics is not None:
            return ("200 OK", "text/plain; version=0.0.4; charset=utf-8", self.metrics())
        return ("404 Not Found", "text/plain", b"not found")
