"""The `{{ cookiecutter.project_slug }}` console script."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from .container import Container, shutdown
from .logging_setup import configure_logging
from .messaging.config import ConfigError
from .messaging.probes import ProbeServer
from .ops import commands as ops_commands
from .ops.errors import OpsError
from .settings import SettingsError

log = logging.getLogger("{{ cookiecutter.package_name }}")

PROG = "{{ cookiecutter.project_slug }}"
DESCRIPTION = "{{ cookiecutter.description }}"

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _migrations_dir() -> Path:
    return Path(os.environ.get("MIGRATIONS_DIR", PROJECT_ROOT / "migrations"))


def cmd_migrate(container: Container, args: argparse.Namespace) -> int:
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_migrations_dir()))
    config.set_main_option("sqlalchemy.url", container.settings().database_url.replace("%", "%%"))
    command.upgrade(config, args.revision)
    log.info("database migrated to %s", args.revision)
    return 0


def cmd_api(container: Container, args: argparse.Namespace) -> int:
    import uvicorn

    from .api.app import create_app

    settings = container.settings()
    uvicorn.run(
        create_app(container),
        host=args.host or settings.api_host,
        port=args.port or settings.api_port,
        log_config=None,
        access_log=False,
    )
    return 0


async def _run_until_signal(
    start: Callable[[], Coroutine[Any, Any, None]], stop: Callable[[], None]
) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    await start()


def _metrics_renderer() -> Callable[[], bytes] | None:
{%- if cookiecutter.opentelemetry %}
    from .telemetry import render_metrics

    return render_metrics
{%- else %}
    return None
{%- endif %}


def cmd_worker(container: Container, args: argparse.Namespace) -> int:
    from .messaging.worker import Worker

    settings = container.settings()
    registry = container.registry()
    for name in args.box or []:
        registry.get(name)

    async def main() -> None:
        container.producer().start()
        worker = Worker(
            registry,
            container.resources(),
            settings.asyncpg_dsn,
            box_names=args.box,
            concurrency=args.concurrency,
            middlewares=container.middlewares(),
            shutdown_timeout=args.shutdown_timeout,
            application_name=f"{settings.service_name}-worker",
        )
        port = settings.worker_probe_port if args.probe_port is None else args.probe_port
        probe_port = port or None  # 0 turns probes off
        probes = ProbeServer(
            probe_port,
            worker.liveness,
            worker.readiness,
            _metrics_renderer(),
            host=settings.probe_host,
        )
        await probes.start()
        try:
            await _run_until_signal(worker.run, worker.stop)
        finally:
            await probes.close()
            await shutdown(container)

    asyncio.run(main())
    return 0


def cmd_consumer(container: Container, args: argparse.Namespace) -> int:
    from .messaging.inbox_consumer import InboxConsumer

    settings = container.settings()
    boxes = container.registry().select(args.box, kind="inbox")
    if not boxes:
        raise ConfigError(
            "no inbox boxes to consume: configure one under 'inbox:' in the boxes file"
        )

    async def main() -> None:
        observer = container.observer()
        consumers = [
            InboxConsumer(
                box,
                container.engine(),
                settings.kafka_config(),
                settings.service_name,
                observer=observer,
            )
            for box in boxes
        ]
        loop = asyncio.get_running_loop()

        def alive() -> tuple[bool, str]:
            stalled = [
                c.box.name for c in consumers if c.last_poll and loop.time() - c.last_poll > 120
            ]
            return (False, f"consumers stalled: {stalled}") if stalled else (True, "ok")

        def ready() -> tuple[bool, str]:
            waiting = [c.box.name for c in consumers if not c.ready.is_set()]
            return (False, f"not polling yet: {waiting}") if waiting else (True, "ok")

        port = settings.consumer_probe_port if args.probe_port is None else args.probe_port
        probe_port = port or None  # 0 turns probes off
        probes = ProbeServer(
            probe_port, alive, ready, _metrics_renderer(), host=settings.probe_host
        )
        await probes.start()

        def stop() -> None:
            for consumer in consumers:
                consumer.stop()

        async def run_all() -> None:
            await asyncio.gather(*(consumer.run() for consumer in consumers))

        try:
            await _run_until_signal(run_all, stop)
        finally:
            await probes.close()
            await container.engine().dispose()

    asyncio.run(main())
    return 0


def cmd_backfill(container: Container, args: argparse.Namespace) -> int:
    from .messaging.backfill import backfill
    from .messaging.registry import import_object
    from .messaging.replication import REPLICATED

    model = import_object(args.model, "backfill MODEL")
    if model not in REPLICATED:
        raise ConfigError(
            f"backfill: {args.model} is not a replicated model (mark it with @replicated)"
        )
    container.outbox()  # installs replication and resolves the boxes

    async def main() -> None:
        try:
            report = await backfill(
                container.session_factory(),
                container.engine(),
                container.registry(),
                model,
                name=args.name,
                batch_size=args.batch_size,
                rate_per_second=args.rate,
                max_pending=args.max_pending,
            )
            print(
                f"backfill {report.name}: {report.emitted} items emitted, last id {report.last_id}"
            )
        finally:
            await container.engine().dispose()

    asyncio.run(main())
    return 0


def cmd_check_config(container: Container, _args: argparse.Namespace) -> int:
    registry = container.registry()
    for box in registry:
        events = ", ".join(sorted({b.event_name or "*" for b in box.transports}))
        print(
            f"{box.kind:6} {box.name}: table {box.table_name}, "
            f"{box.config.bucket_count} buckets, events {events}"
        )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)

    migrate = sub.add_parser("migrate", help="apply database migrations (alembic upgrade)")
    migrate.add_argument("revision", nargs="?", default="head")
    migrate.set_defaults(func=cmd_migrate)

    api = sub.add_parser("api", help="serve the HTTP API")
    api.add_argument("--host", default=None)
    api.add_argument("--port", type=int, default=None)
    api.set_defaults(func=cmd_api)

    worker = sub.add_parser("worker", help="relay outbox items and process inbox items")
    worker.add_argument("--box", action="append", help="process only this box (repeatable)")
    worker.add_argument("--concurrency", type=int, default=2, help="lanes per box (default 2)")
    worker.add_argument(
        "--shutdown-timeout", type=float, default=30.0, help="seconds to finish a batch on stop"
    )
    worker.add_argument("--probe-port", type=int, default=None, help="probe port (0: off)")
    worker.set_defaults(func=cmd_worker)

    consumer = sub.add_parser("consumer", help="consume Kafka topics into the inbox tables")
    consumer.add_argument(
        "--box", action="append", help="consume only for this inbox box (repeatable)"
    )
    consumer.add_argument("--probe-port", type=int, default=None, help="probe port (0: off)")
    consumer.set_defaults(func=cmd_consumer)

    backfill = sub.add_parser("backfill", help="re-emit items for every row of a replicated model")
    backfill.add_argument("model", help="module:Class of a @replicated model")
    backfill.add_argument("--name", default=None, help="watermark name (default: the table name)")
    backfill.add_argument("--batch-size", type=int, default=1000)
    backfill.add_argument("--rate", type=float, default=5000.0, help="rows per second at most")
    backfill.add_argument(
        "--max-pending", type=int, default=20_000, help="pause while the box has more pending items"
    )
    backfill.set_defaults(func=cmd_backfill)

    check = sub.add_parser("check-config", help="validate the boxes file and print the boxes")
    check.set_defaults(func=cmd_check_config)

    ops_commands.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    container = Container()
    try:
        if args.command == "generate":  # edits source files: needs no database or settings
            configure_logging("WARNING", "text")
        else:
            settings = container.settings()
            configure_logging(settings.log_level, settings.log_format)
        result: int = args.func(container, args)
        return result
    except (SettingsError, ConfigError, OpsError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
