"""The operator commands that inspect, pause and generate: stats, pause, resume, pauses,
audit and generate (retry, discard, replay, park and purge are in `bulk_commands.py`).
`register` adds them to the console script.

Every command that changes something writes an audit row naming its actor: `cli:` and the
OS user, or `cli:` and the `--actor` given (for a shared account or a script).
"""

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.operations.actions import get_box
from outbox_engine.operations.selection import check_text

from .bulk_commands import Actor
from .context import cli_actor, state
from .errors import OpsError

INSPECT = "Operator commands that read"
PAUSES = "Kill switches"

Json = Annotated[bool, typer.Option("--json", help="Machine-readable output (JSON).")]
PauseBox = Annotated[str, typer.Option("--box", help="The box (see check-config).")]
Bucket = Annotated[
    int | None,
    typer.Option("--bucket", help="Only this bucket (0 to bucket_count - 1).", show_default=False),
]
PauseKey = Annotated[
    str | None, typer.Option("--key", help="Only this partition key.", show_default=False)
]


def _pause_target(
    ctx: typer.Context, box: str, bucket: int | None, key: str | None
) -> tuple[int | None, str | None]:
    if bucket is not None and key is not None:
        raise OpsError("--bucket and --key exclude each other: pause a bucket or a key")
    found = get_box(state(ctx).container().registry(), box)
    if bucket is not None and not 0 <= bucket < found.config.bucket_count:
        raise OpsError(f"box {found.name} has buckets 0-{found.config.bucket_count - 1}")
    return bucket, check_text("key", key)


def register(app: typer.Typer) -> None:
    """Add the operator commands to the console script."""

    @app.command(rich_help_panel=INSPECT)
    def stats(
        ctx: typer.Context,
        box: Annotated[
            list[str] | None,
            typer.Option("--box", help="Only this box (repeatable; default: every box)."),
        ] = None,
        json_: Annotated[
            bool, typer.Option("--json", help="Machine-readable output (JSON).")
        ] = False,
        top: Annotated[int, typer.Option("--top", help="Rows per top list (0-100).")] = 5,
    ) -> None:
        """Per box: depth by status, lag, hot buckets and keys, failing events, pauses (for a
        box Debezium relays: its capture trigger, slot and capture rows instead)."""
        from outbox_engine.operations.stats import box_stats

        from ..debezium_names import debezium_names
        from .stats import render

        cli = state(ctx)
        boxes = cli.container().registry().select(box)
        names = debezium_names(cli.container().settings())

        async def work(engine: AsyncEngine) -> None:
            found = [await box_stats(engine, b, top, names) for b in boxes]
            if json_:
                print(json.dumps([s.as_json() for s in found], indent=2))
            else:
                print(render(found))

        cli.run(work)

    @app.command(rich_help_panel=PAUSES)
    def pause(
        ctx: typer.Context,
        box: PauseBox,
        bucket: Bucket = None,
        key: PauseKey = None,
        reason: Annotated[
            str, typer.Option("--reason", help="Shown in stats and the admin page.")
        ] = "",
        actor: Actor = None,
    ) -> None:
        """Stop relaying a box, one bucket or one key (a kill switch; `resume` lifts it)."""
        from outbox_engine.store.pauses import Pause, add_pause

        target = _pause_target(ctx, box, bucket, key)
        check_text("--reason", reason, 1000, allow_empty=True)
        who = cli_actor(actor)

        async def work(engine: AsyncEngine) -> None:
            added = await add_pause(
                engine, box, reason=reason, actor=who, bucket=target[0], event_key=target[1]
            )
            what = Pause(box, bucket=target[0], event_key=target[1]).target
            print(f"paused {what}" if added else f"{what} was already paused")

        state(ctx).run(work)

    @app.command(rich_help_panel=PAUSES)
    def resume(
        ctx: typer.Context,
        box: PauseBox,
        bucket: Bucket = None,
        key: PauseKey = None,
        all_: Annotated[bool, typer.Option("--all", help="Lift every pause of the box.")] = False,
        actor: Actor = None,
    ) -> None:
        """Lift a pause (of the box, a bucket, a key, or --all of them)."""
        from outbox_engine.store.pauses import Pause, remove_pause

        if all_ and (bucket is not None or key is not None):
            raise OpsError("--all lifts every pause of the box: give it without --bucket or --key")
        target = _pause_target(ctx, box, bucket, key)
        who = cli_actor(actor)

        async def work(engine: AsyncEngine) -> None:
            removed = await remove_pause(
                engine, box, every=all_, actor=who, bucket=target[0], event_key=target[1]
            )
            what = (
                f"every pause of box {box}"
                if all_
                else Pause(box, bucket=target[0], event_key=target[1]).target
            )
            print(
                f"resumed {what} ({removed} pauses lifted)" if removed else f"{what} was not paused"
            )

        state(ctx).run(work)

    @app.command(rich_help_panel=PAUSES)
    def pauses(
        ctx: typer.Context,
        box: Annotated[
            str | None, typer.Option("--box", help="Only this box.", show_default=False)
        ] = None,
    ) -> None:
        """List the pauses in force."""
        from outbox_engine.store.pauses import list_pauses

        cli = state(ctx)
        if box:
            get_box(cli.container().registry(), box)

        async def work(engine: AsyncEngine) -> None:
            found = await list_pauses(engine, box)
            for p in found:
                when = p.created_at.isoformat() if p.created_at else ""
                print(f"{p.target}\t{when}\t{p.reason}")
            if not found:
                print("nothing is paused")

        cli.run(work)

    @app.command(rich_help_panel=INSPECT)
    def audit(
        ctx: typer.Context,
        limit: Annotated[int, typer.Option("--limit", help="Rows (1-1000).")] = 20,
        box: Annotated[
            str | None, typer.Option("--box", help="Only actions on this box.", show_default=False)
        ] = None,
        action: Annotated[
            str | None,
            typer.Option(
                "--action",
                help="Only this action (retry, discard, park, pause, ...).",
                show_default=False,
            ),
        ] = None,
        json_: Json = False,
    ) -> None:
        """The operator audit log, newest first."""
        from outbox_engine.store.audit import MAX_LIMIT, recent_audit

        if not 1 <= limit <= MAX_LIMIT:
            raise OpsError(f"--limit must be 1-{MAX_LIMIT}")
        cli = state(ctx)
        if box:
            get_box(cli.container().registry(), box)
        wanted = check_text("--action", action)

        async def work(engine: AsyncEngine) -> None:
            entries = await recent_audit(engine, limit, box=box, action=wanted)
            if json_:
                print(json.dumps([e.as_json() for e in entries], indent=2))
                return
            for e in entries:
                selection = json.dumps(e.selection, sort_keys=True)
                print(
                    f"{e.id}\t{e.at.isoformat()}\t{e.actor}\t{e.action}\t{e.box or '-'}\t"
                    f"{e.affected}\t{selection}\t{e.detail or ''}"
                )
            if not entries:
                print("no audit rows match" if box or wanted else "the audit log is empty")

        cli.run(work)

    generate = typer.Typer(
        help="Add a box or a transport to this project's source (needs no database).",
        no_args_is_help=True,
    )
    app.add_typer(generate, name="generate", rich_help_panel="Development")
    Root = Annotated[
        str | None,
        typer.Option(
            "--root", help="The project directory (default: this one).", show_default=False
        ),
    ]

    @app.command(rich_help_panel="Development")
    def asyncapi(
        output: Annotated[
            Path | None,
            typer.Option(
                "--output",
                help="Where the document goes (default contracts/asyncapi.json; - is stdout).",
                show_default=False,
            ),
        ] = None,
        check: Annotated[
            bool,
            typer.Option(
                "--check",
                help="Compare the published document with the current one; exit 1 on a "
                "breaking change.",
            ),
        ] = False,
    ) -> None:
        """Write the AsyncAPI 3.0 document of the boxes file, or --check it (needs no database)."""
        from outbox_engine.contracts.publish import main as asyncapi_main

        from ..contract import SERVICE
        from .service_commands import boxes_file

        code = asyncapi_main(SERVICE, output, check, boxes_file())
        if code:
            raise typer.Exit(code)

    @generate.command("item")
    def generate_item_command(
        name: Annotated[str, typer.Argument(help="e.g. audit_log -> box audit_log_outbox_item.")],
        kind: Annotated[Kind, typer.Option("--kind", help="An outbox or an inbox box.")],
        root: Root = None,
    ) -> None:
        """A new box: model, migration, box configuration and a working transport."""
        from .generate import ProjectFiles, generate_item

        project = ProjectFiles.find(root)
        _wrote(project.root, generate_item(project, name, kind.value))

    @generate.command("transport")
    def generate_transport_command(
        box: Annotated[str, typer.Argument(help="The box the transport sends for.")],
        name: Annotated[
            str, typer.Argument(help="e.g. billing_webhook -> class BillingWebhookTransport.")
        ],
        event: Annotated[
            str | None,
            typer.Option(
                "--event",
                help="Only items of this event (default: every event).",
                show_default=False,
            ),
        ] = None,
        root: Root = None,
    ) -> None:
        """A new transport class (a working, logging one) and its entry in the box's transports."""
        from .generate import ProjectFiles, generate_transport

        project = ProjectFiles.find(root)
        _wrote(project.root, generate_transport(project, box, name, event))


class Kind(StrEnum):
    outbox = "outbox"
    inbox = "inbox"


def _wrote(root: Path, written: list[Path]) -> None:
    for path in written:
        print(f"wrote {path.relative_to(root)}")
