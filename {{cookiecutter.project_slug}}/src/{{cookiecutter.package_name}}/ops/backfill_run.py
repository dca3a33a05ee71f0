"""`backfill` from the CLI: progress while it runs, and where it stopped when interrupted.

The engine's backfill (`outbox_engine/sharding/backfill.py`) commits each batch with its watermark; this
module watches that watermark (one small query a second) to print progress, and on Ctrl-C
or an outage prints the last committed id: the same command resumes after it.
"""

import asyncio
import sys

import typer
from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.config.boxes import ConfigError
from outbox_engine.store.backfill import read_watermark

from .context import CliState
from .reach import EXIT_INTERRUPTED

POLL_SECONDS = 1.0


async def _watch(engine: AsyncEngine, name: str, seen: list[tuple[int, int]]) -> None:
    """Print a line each time the watermark moves (a batch committed)."""
    while True:
        await asyncio.sleep(POLL_SECONDS)
        found = await read_watermark(engine, name)
        mark = None if found is None else (found.last_id, found.emitted)
        if mark is not None and (not seen or mark != seen[-1]):
            seen.append(mark)
            print(f"backfill {name}: {mark[1]} items emitted, last id {mark[0]}", flush=True)


def run_backfill(
    cli: CliState,
    model_path: str,
    *,
    name: str | None,
    batch_size: int,
    rate: float,
    max_pending: int,
) -> None:
    from outbox_engine.config.registry import import_object
    from outbox_engine.sharding.backfill import backfill
    from outbox_engine.sharding.replication import REPLICATED

    container = cli.container()
    model = import_object(model_path, "backfill MODEL")
    if model not in REPLICATED:
        raise ConfigError(
            f"backfill: {model_path} is not a replicated model (mark it with @replicated)"
        )
    container.outbox()  # installs replication and resolves the boxes
    mark_name = name or str(model.__tablename__)
    seen: list[tuple[int, int]] = []

    async def main() -> None:
        engine = container.engine()
        watcher = asyncio.create_task(_watch(engine, mark_name, seen))
        try:
            report = await backfill(
                container.session_factory(),
                engine,
                container.registry(),
                model,
                name=name,
                batch_size=batch_size,
                rate_per_second=rate,
                max_pending=max_pending,
            )
            print(
                f"backfill {report.name}: {report.emitted} items emitted, last id {report.last_id}"
            )
        finally:
            watcher.cancel()
            await engine.dispose()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        where = f"after id {seen[-1][0]}" if seen else "at the stored watermark"
        print(
            f"backfill {mark_name}: interrupted; stopped {where}; run the same command "
            f"(--name {mark_name}) to resume after the last committed batch",
            file=sys.stderr,
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
