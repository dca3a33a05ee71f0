"""A TCP proxy whose open connections can go silent, for tests of a network path that stops
answering without closing (a host gone without a reset, a failover behind a virtual
address, a firewall that dropped its state).

`SilentProxy(host, port)` listens on 127.0.0.1 (an ephemeral port, `.port`) and carries
bytes both ways between each client and a new connection to `host:port`. `silence()` makes
every connection open at that moment drop what either side sends while both sockets stay
open: the client's writes succeed and nothing ever comes back. Connections made after it
are carried as before, as a new connection to a failed-over address would be. The proxy
runs in threads of its own, so it keeps working while the test's event loop waits.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class _Link:
    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.silent = False

    def close(self) -> None:
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class SilentProxy:
    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._links: list[_Link] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.dropped_bytes = 0
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def silence(self) -> int:
        """Silence every open connection; returns how many."""
        with self._lock:
            for link in self._links:
                link.silent = True
            return len(self._links)

    def close(self) -> None:
        self._closed.set()
        self._accepting.join(timeout=5)
        self._listener.close()
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            upstream = socket.create_connection(self._target, timeout=10)
            upstream.settimeout(None)
            link = _Link(client, upstream)
            with self._lock:
                self._links.append(link)
            for source, target in ((client, upstream), (upstream, client)):
                carry = threading.Thread(target=self._carry, args=(link, source, target))
                carry.daemon = True
                carry.start()

    def _carry(self, link: _Link, source: socket.socket, target: socket.socket) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                break
            if not data:
                break
            if link.silent:
                with self._lock:
                    self.dropped_bytes += len(data)
                continue
            try:
                target.sendall(data)
            except OSError:
                break
        if not link.silent:
            # One side closed: pass it on (a silent link passes nothing, not even this).
            link.close()
