"""The destructive operator commands: retry, discard, replay and park (purge: `purge_command.py`).

Each validates its input, counts the rows it would change, asks for confirmation (unless
`--yes`; refused without a terminal), then changes them in batches (`outbox_engine/operations/batches.py`) with
progress and one audit row per batch. Ctrl-C or an outage mid-run prints the resume
position (`--after-id`); `--dry-run` only counts.
"""

import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

from outbox_engine.operations.actions import DISCARD, PARK, REPLAY, RETRY, Action, get_box
from outbox_engine.operations.batches import BatchRun, check_batching, count_action, run_action
from outbox_engine.operations.selection import Selection

from .console import Progress, confirm, stopped_line
from .context import cli_actor, state

INTERRUPTED = 130


class StoppedRun(Exception):
    """A batched run failed after committing some batches: the resume line goes with it."""

    def __init__(self, run: BatchRun, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.run = run
        self.cause = cause

    @property
    def resume(self) -> str:
        return f"stopped after id {self.run.resume_from}; resume with --after-id {self.run.resume_from}"


BoxOption = Annotated[str, typer.Option("--box", help="The box (see check-config).")]
Ids = Annotated[list[str] | None, typer.Option("--id", metavar="ID", help="Item id (repeatable).")]
Key = Annotated[str | None, typer.Option("--key", help="Only items of this partition key.")]
Event = Annotated[str | None, typer.Option("--event", help="Only items of this event name.")]
Since = Annotated[
    str | None,
    typer.Option("--since", metavar="ISO_TIME", help="Created at or after (UTC if no offset)."),
]
Until = Annotated[
    str | None,
    typer.Option("--until", metavar="ISO_TIME", help="Created before (UTC if no offset)."),
]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Count the items, change nothing.")]
Actor = Annotated[
    str | None,
    typer.Option("--actor", metavar="NAME", help="Who the audit log names (default: the OS user)."),
]
Yes = Annotated[
    bool,
    typer.Option(
        "--yes", "-y", help="Change without asking (required when stdin is not a terminal)."
    ),
]
BatchSize = Annotated[
    int, typer.Option("--batch-size", min=1, help="Rows changed per transaction (and audit row).")
]
AfterId = Annotated[
    int,
    typer.Option(
        "--after-id",
        min=0,
        metavar="ID",
        help="Resume: only items with a larger id (0: from the start).",
    ),
]
Rate = Annotated[
    float | None,
    typer.Option("--rate", help="Rows per second at most (default: no limit).", show_default=False),
]


def _bulk(
    ctx: typer.Context,
    action: Action,
    box_name: str,
    selection_args: dict[str, object],
    *,
    dry_run: bool,
    actor: str | None,
    yes: bool,
    batch_size: int,
    after_id: int,
    rate: float | None,
) -> None:
    cli = state(ctx)
    check_batching(batch_size, after_id, rate)
    box = get_box(cli.container().registry(), box_name)
    selection = Selection.build(**selection_args)  # type: ignore[arg-type]
    who = cli_actor(actor)
    total = cli.run(lambda engine: count_action(engine, box, action, selection, after_id))
    if dry_run:
        print(f"dry run: {action.name} would change {total} items of box {box.name}")
        return
    if total:
        confirm(f"{action.name} will change {total} items of box {box.name}.", yes=yes)
    run = BatchRun(action.name, box.name, total, after_id)
    try:
        with Progress(run, batch_size) as progress:
            cli.run(
                lambda engine: run_action(
                    engine,
                    box,
                    action,
                    selection,
                    run,
                    actor=who,
                    batch_size=batch_size,
                    rate=rate,
                    on_batch=progress.batch,
                )
            )
    except KeyboardInterrupt:
        typer.echo(stopped_line(run, "interrupted"), err=True)
        raise typer.Exit(INTERRUPTED) from None
    except Exception as exc:
        if run.batches:
            raise StoppedRun(run, exc) from exc
        raise
    batches = f" in {run.batches} batches" if run.batches > 1 else ""
    print(f"{action.name}: changed {run.changed} items of box {box.name}{batches}")


def _selection(**given: object) -> dict[str, object]:
    return {name: value for name, value in given.items() if value is not None}


PANEL = "Operator commands that change items (they ask first, or take --yes)"
FailedStatuses = Annotated[
    list[str] | None,
    typer.Option(
        "--status",
        help="failed, parked, discarded or pending (repeatable; default failed unless --id).",
    ),
]
DiscardStatuses = Annotated[
    list[str] | None,
    typer.Option(
        "--status", help="failed, parked or pending (repeatable; default failed unless --id)."
    ),
]
ParkStatuses = Annotated[
    list[str] | None,
    typer.Option("--status", help="failed or pending (repeatable; default failed unless --id)."),
]
IdRange = Annotated[
    str | None, typer.Option("--id-range", metavar="FIRST:LAST", help="Ids, both inclusive.")
]


def _shape(
    ctx: typer.Context,
    box: BoxOption,
    id: Ids = None,
    key: Key = None,
    event: Event = None,
    since: Since = None,
    until: Until = None,
    dry_run: DryRun = False,
    actor: Actor = None,
    yes: Yes = False,
    batch_size: BatchSize = 1000,
    after_id: AfterId = 0,
    rate: Rate = None,
) -> None:
    """The options every bulk command takes: its signature is theirs, plus one selector."""


def _bulk_command(
    action: Action, summary: str, selector: str, selector_option: Any, selection_key: str
) -> Callable[..., None]:
    """The command of one action: `_shape`'s options and `selector` (e.g. --status), read by
    Typer from the signature given here. One body for the four commands, so an option added
    to `_shape` reaches every one of them."""

    def command(ctx: typer.Context, **given: Any) -> None:
        chosen = _selection(
            ids=given["id"],
            event_key=given["key"],
            event_name=given["event"],
            since=given["since"],
            until=given["until"],
            **{selection_key: given[selector]},
        )
        _bulk(
            ctx,
            action,
            given["box"],
            chosen,
            dry_run=given["dry_run"],
            actor=given["actor"],
            yes=given["yes"],
            batch_size=given["batch_size"],
            after_id=given["after_id"],
            rate=given["rate"],
        )

    shape = inspect.signature(_shape)
    parameters = list(shape.parameters.values())
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters.insert(
        3, inspect.Parameter(selector, kind, default=None, annotation=selector_option)
    )
    command.__signature__ = shape.replace(parameters=parameters)  # type: ignore[attr-defined]
    command.__name__ = command.__qualname__ = action.name
    command.__doc__ = summary
    return command


COMMANDS = (
    (
        RETRY,
        "Make failed (or chosen) items pending again, due now, with attempts reset.",
        "status",
        FailedStatuses,
        "statuses",
    ),
    (
        DISCARD,
        "Give up on failed (or chosen pending or parked) items: they are never sent.",
        "status",
        DiscardStatuses,
        "statuses",
    ),
    (
        REPLAY,
        "Send delivered items again (same message id); needs a selection.",
        "id_range",
        IdRange,
        "id_range",
    ),
    (
        PARK,
        "Move failed items (a blocked key's head) aside: their key moves on.",
        "status",
        ParkStatuses,
        "statuses",
    ),
)


def register(app: typer.Typer) -> None:
    """Add retry, discard, replay and park to the console script."""
    for action, summary, selector, option, key in COMMANDS:
        app.command(rich_help_panel=PANEL)(_bulk_command(action, summary, selector, option, key))
