"""The worker as a process: a `Worker` built from `WorkerOptions`, its probes, its signals.

The console script's `worker` command only parses its arguments into a `WorkerOptions` and
calls `WorkerApp(...).serve()`; the tests and `drain()` build their in-process workers with
`build_worker` from the same options. So the worker's constructor is called in one place,
and the process behaves the same wherever it is started.

`serve()` starts the probe server first (a taken port stops the process before it connects
to anything, `ProbePortTaken`), then starts the Kafka producer and runs the worker until
SIGTERM or SIGINT, and finally closes the probes and calls `cleanup` (the service closes
its container there). Just before the worker runs, it sets the process's garbage collector
for a relay (gc_tuning.py; `WorkerOptions.gc_threshold`): `build_worker` does not, as it
serves processes that are not only a worker.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from outbox_engine.config.registry import BoxRegistry
from outbox_engine.gc_tuning import tune_gc
from outbox_engine.middleware import Middlewares
from outbox_engine.observability.probes import ProbeServer
from outbox_engine.relay.options import WorkerOptions
from outbox_engine.relay.worker import Worker
from outbox_engine.signals import run_until_signal
from outbox_engine.transports.resources import Resources


def build_worker(
    registry: BoxRegistry,
    resources: Resources,
    dsn: str,
    options: WorkerOptions,
    middlewares: Middlewares | None = None,
) -> Worker:
    """The one place a `Worker` is constructed (the app, the tests, `drain()`)."""
    return Worker(registry, resources, dsn, options, middlewares)


class WorkerApp:
    """One worker process: `serve()` runs it until a signal."""

    def __init__(
        self,
        registry: BoxRegistry,
        resources: Resources,
        dsn: str,
        options: WorkerOptions,
        *,
        middlewares: Middlewares | None = None,
        metrics: Callable[[], bytes] | None = None,
    ) -> None:
        self.options = options
        self.resources = resources
        self.worker = build_worker(registry, resources, dsn, options, middlewares)
        self.probes = ProbeServer(
            options.probe_port,
            self.worker.liveness,
            self.worker.readiness,
            metrics,
            host=options.probe_host,
        )

    async def serve(self, cleanup: Callable[[], Awaitable[None]] | None = None) -> None:
        """Probes, then the worker until SIGTERM/SIGINT; then probes closed and `cleanup()`
        (not called when the probe port is taken: nothing was opened yet)."""
        await self.probes.start()  # first: a taken port stops the process before it connects
        try:
            self.resources.producer.start()
            tune_gc(self.options.gc_threshold)
            await run_until_signal(self.worker.run, self.worker.stop)
        finally:
            await self.probes.close()
            if cleanup is not None:
                await cleanup()
