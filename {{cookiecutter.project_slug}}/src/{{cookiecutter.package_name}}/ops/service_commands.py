"""The service's own commands: migrate, api, worker, consumer, backfill and check-config.

`check-config` reads only the boxes file: it needs no database or Kafka settings. The worker
and the consumer listen for probes on a port (`--probe-port`); a port another process holds
stops them at once with a line that says what to do (`ProbePortTaken`), and
`--probe-port auto` picks a free one and logs it.
"""

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from .context import plain, state
from .errors import OpsError

log = logging.getLogger(__name__.split(".")[0])

PROJECT_ROOT = Path(__file__).resolve().parents[3]
PANEL = "Service processes"

Boxes = Annotated[
    list[str] | None,
    typer.Option(
        "--box", help="Only this box (repeatable; default: every box).", show_default=False
    ),
]
ProbePort = Annotated[
    str | None,
    typer.Option(
        "--probe-port",
        metavar="PORT|auto",
        help="Port of /healthz, /readyz (and /metrics): a number, auto (a free port, logged) "
        "or 0 (off). Default: the *_PROBE_PORT setting.",
        show_default=False,
    ),
]


def probe_port(given: str | None, configured: int) -> int | None:
    """The ProbeServer port: None (off) for 0, 0 (any free port) for `auto`, else the port."""
    if given is None:
        return configured or None
    text = given.strip().lower()
    if text == "auto":
        return 0
    if not text.isascii() or not text.isdigit() or not 0 <= int(text) <= 65535:
        raise OpsError(f"--probe-port must be 0-65535 or auto, not {given!r}")
    return int(text) or None


def _migrations_dir() -> Path:
    return Path(os.environ.get("MIGRATIONS_DIR", PROJECT_ROOT / "migrations"))


def _metrics_renderer() -> Callable[[], bytes] | None:
{%- if cookiecutter.opentelemetry %}
    from ..telemetry import render_metrics

    return render_metrics
{%- else %}
    return None
{%- endif %}


def register(app: typer.Typer) -> None:
    """Add the service's commands to the console script."""

    @app.command(rich_help_panel=PANEL)
    def migrate(
        ctx: typer.Context,
        revision: Annotated[
            str, typer.Argument(help="The alembic revision to upgrade to.")
        ] = "head",
    ) -> None:
        """Apply the database migrations (alembic upgrade)."""
        from alembic import command
        from alembic.config import Config

        settings = state(ctx).container().settings()
        config = Config()
        config.set_main_option("script_location", str(_migrations_dir()))
        config.set_main_option("sqlalchemy.url", plain(settings.database_url).replace("%", "%%"))
        command.upgrade(config, revision)
        log.info("database migrated to %s", revision)

    @app.command(rich_help_panel=PANEL)
    def api(
        ctx: typer.Context,
        host: Annotated[
            str | None,
            typer.Option(
                "--host", help="Listen address (default: the API_HOST setting).", show_default=False
            ),
        ] = None,
        port: Annotated[
            int | None,
            typer.Option(
                "--port",
                min=1,
                max=65535,
                help="Port (default: the API_PORT setting).",
                show_default=False,
            ),
        ] = None,
    ) -> None:
        """Serve the HTTP API (and the admin page when ADMIN_TOKEN is set)."""
        import uvicorn

        from outbox_engine import tune_gc

        from ..api.app import create_app

        container = state(ctx).container()
        settings = container.settings()
        asgi_app = create_app(container)
        tune_gc(settings.gc_threshold)
        uvicorn.run(
            asgi_app,
            host=host or settings.api_host,
            port=port or settings.api_port,
            log_config=None,
            access_log=False,
        )

    @app.command(rich_help_panel=PANEL)
    def worker(
        ctx: typer.Context,
        box: Boxes = None,
        concurrency: Annotated[
            int, typer.Option("--concurrency", min=1, help="Lanes per box.")
        ] = 2,
        join_lanes: Annotated[
            bool,
            typer.Option(
                "--join-lanes",
                help="Lane 0 claims for every lane until a claim leaves a backlog: fewer "
                "claims at a steady rate, batches one after another (docs/performance.md).",
            ),
        ] = False,
        shutdown_timeout: Annotated[
            float,
            typer.Option("--shutdown-timeout", min=0, help="Seconds to finish a batch on stop."),
        ] = 30.0,
        probe: ProbePort = None,
    ) -> None:
        """Relay outbox items and process inbox items, until SIGTERM or Ctrl-C."""
        from outbox_engine.event_loop import run as run_on_loop
        from outbox_engine.relay.app import WorkerApp
        from outbox_engine.relay.options import WorkerOptions

        from ..container import shutdown
        from ..debezium_names import debezium_names

        container = state(ctx).container()
        settings = container.settings()
        registry = container.registry()
        for name in box or []:
            registry.get(name)
        options = WorkerOptions(
            boxes=tuple(box or ()),
            concurrency=concurrency,
            join_lanes=join_lanes,
            shutdown_timeout=shutdown_timeout,
            application_name=f"{settings.service_name}-worker",
            probe_port=probe_port(probe, settings.worker_probe_port),
            probe_host=settings.probe_host,
            debezium_slot=debezium_names(settings).slot,
            gc_threshold=settings.gc_threshold,
        )

        async def main() -> None:
            worker = WorkerApp(
                registry,
                container.resources(),
                settings.asyncpg_dsn,
                options,
                middlewares=container.middlewares(),
                metrics=_metrics_renderer(),
            )
            await worker.serve(cleanup=lambda: shutdown(container))

        run_on_loop(main(), settings.event_loop)

    @app.command(rich_help_panel=PANEL)
    def consumer(
        ctx: typer.Context,
        box: Annotated[
            list[str] | None,
            typer.Option(
                "--box",
                help="Only this inbox box (repeatable; default: every inbox box).",
                show_default=False,
            ),
        ] = None,
        probe: ProbePort = None,
    ) -> None:
        """Consume the Kafka topics into the inbox tables, until SIGTERM or Ctrl-C."""
        from outbox_engine.event_loop import run as run_on_loop
        from outbox_engine.inbox.app import ConsumerApp, ConsumerOptions, inbox_boxes

        container = state(ctx).container()
        settings = container.settings()
        inbox_boxes(container.registry(), box or ())  # none to consume: a usage error, first
        options = ConsumerOptions(
            service_name=settings.service_name,
            boxes=tuple(box or ()),
            probe_port=probe_port(probe, settings.consumer_probe_port),
            probe_host=settings.probe_host,
            gc_threshold=settings.gc_threshold,
        )

        async def main() -> None:
            consumers = ConsumerApp(
                container.registry(),
                container.engine(),
                settings.kafka_config(),
                options,
                observer=container.observer(),
                metrics=_metrics_renderer(),
            )
            await consumers.serve(cleanup=container.engine().dispose)

        run_on_loop(main(), settings.event_loop)

    @app.command(rich_help_panel=PANEL)
    def backfill(
        ctx: typer.Context,
        model: Annotated[str, typer.Argument(help="module:Class of a @replicated model.")],
        name: Annotated[
            str | None,
            typer.Option(
                "--name", help="Watermark name (default: the table name).", show_default=False
            ),
        ] = None,
        batch_size: Annotated[
            int, typer.Option("--batch-size", min=1, help="Rows per batch (transaction).")
        ] = 1000,
        rate: Annotated[
            float, typer.Option("--rate", min=0.001, help="Rows per second at most.")
        ] = 5000.0,
        max_pending: Annotated[
            int,
            typer.Option(
                "--max-pending", min=0, help="Pause while the box has more pending items."
            ),
        ] = 20_000,
    ) -> None:
        """Re-emit an item for every row of a replicated model, in batches (resumable)."""
        from .backfill_run import run_backfill

        run_backfill(
            state(ctx), model, name=name, batch_size=batch_size, rate=rate, max_pending=max_pending
        )

    @app.command("check-config", rich_help_panel=PANEL)
    def check_config() -> None:
        """Validate the boxes file (BOXES_FILE) and list the boxes; needs no database or Kafka."""
        from outbox_engine.config.boxes import load_boxes
        from outbox_engine.config.registry import BoxRegistry

        registry = BoxRegistry(load_boxes(boxes_file()))
        for b in registry:
            events = ", ".join(sorted({t.event_name or "*" for t in b.transports}))
            print(
                f"{b.kind:6} {b.name}: table {b.table_name}, {b.config.bucket_count} buckets, events {events}"
            )


def boxes_file() -> Path:
    """BOXES_FILE as the settings read it (environment, .env), without the other settings."""
    from pydantic_settings import BaseSettings

    from ..settings import DEFAULT_BOXES_FILE, Settings

    class BoxesOnly(BaseSettings):
        model_config = Settings.model_config
        boxes_file: Path = DEFAULT_BOXES_FILE

    return BoxesOnly().boxes_file
