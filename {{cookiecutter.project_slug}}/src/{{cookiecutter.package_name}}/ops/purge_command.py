"""`purge` from the CLI: apply the retention periods now, in batches, after confirmation.

Counts what each box would lose, asks once for all (or takes `--yes`), then deletes batch
by batch (`outbox_engine.operations.batches.run_purge`), one audit row per batch; Ctrl-C or
an outage prints the box and `--after-id` to resume with.
"""

from functools import partial
from typing import Annotated

import typer

from outbox_engine.operations.batches import BatchRun, check_batching, count_purge, run_purge

from .bulk_commands import INTERRUPTED, PANEL, Actor, DryRun, StoppedRun, Yes
from .console import Progress, confirm, stopped_line
from .context import cli_actor, state
from .errors import OpsError


def register(app: typer.Typer) -> None:
    """Add purge to the console script."""

    @app.command(rich_help_panel=PANEL)
    def purge(
        ctx: typer.Context,
        box: Annotated[
            list[str] | None,
            typer.Option("--box", help="Only this box (repeatable; default: every box)."),
        ] = None,
        dry_run: DryRun = False,
        actor: Actor = None,
        yes: Yes = False,
        batch_size: Annotated[
            int | None,
            typer.Option(
                "--batch-size",
                min=1,
                help="Rows deleted per transaction (default: the box's retention.batch_size).",
                show_default=False,
            ),
        ] = None,
        after_id: Annotated[
            int,
            typer.Option(
                "--after-id",
                min=0,
                metavar="ID",
                help="Resume: only items with a larger id; needs a single --box.",
            ),
        ] = 0,
    ) -> None:
        """Apply the retention periods now: delete old delivered, failed, discarded and parked items."""
        cli = state(ctx)
        check_batching(batch_size or 1, after_id, None)
        boxes = cli.container().registry().select(box)
        if after_id and len(boxes) != 1:
            raise OpsError("--after-id resumes one box: give exactly one --box")
        who = cli_actor(actor)
        counts = {b.name: cli.run(partial(count_purge, box=b, after_id=after_id)) for b in boxes}
        if dry_run:
            for name, n in counts.items():
                print(f"dry run: purge would delete {n} items of box {name}")
            return
        total = sum(counts.values())
        if total:
            listed = ", ".join(f"{n} of box {name}" for name, n in counts.items() if n)
            confirm(f"purge will delete {total} items ({listed}).", yes=yes)
        for b in boxes:
            size = batch_size or b.config.retention.batch_size
            run = BatchRun("purge", b.name, counts[b.name], after_id)
            try:
                with Progress(run, size) as progress:
                    cli.run(
                        partial(
                            run_purge,
                            box=b,
                            run=run,
                            actor=who,
                            batch_size=size,
                            on_batch=progress.batch,
                        )
                    )
            except KeyboardInterrupt:
                typer.echo(stopped_line(run, "interrupted") + f" --box {b.name}", err=True)
                raise typer.Exit(INTERRUPTED) from None
            except Exception as exc:
                if run.batches:
                    raise StoppedRun(run, exc) from exc
                raise
            print(
                f"purge {b.name}: deleted {run.delivered} delivered and "
                f"{run.ended} failed/discarded/parked items"
                + (
                    ""
                    if run.complete
                    else f" (another worker is purging it: stopped early; resume with --box {b.name} --after-id {run.resume_from})"
                )
            )
