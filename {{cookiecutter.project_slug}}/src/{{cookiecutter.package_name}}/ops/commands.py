"""The operator subcommands of the console script: stats, retry, discard, replay, park,
purge, pause, resume, pauses, audit and generate. `register` adds them to the CLI's parser.

Every command that changes something writes an audit row naming its actor: `cli:` and the
OS user, or `cli:` and the `--actor` given (for a shared account or a script).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .actions import DISCARD, PARK, REPLAY, RETRY, Action, apply, get_box, purge_now
from .errors import OpsError
from .selection import Selection, check_text

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from ..container import Container


def _run(container: Container, work: Callable[[AsyncEngine], Awaitable[int]]) -> int:
    async def main() -> int:
        try:
            return await work(container.engine())
        finally:
            await container.engine().dispose()

    return asyncio.run(main())


def cmd_stats(container: Container, args: argparse.Namespace) -> int:
    from .stats import box_stats, render

    boxes = container.registry().select(args.box)

    async def work(engine: AsyncEngine) -> int:
        stats = [await box_stats(engine, box, args.top) for box in boxes]
        if args.json:
            print(json.dumps([s.as_json() for s in stats], indent=2))
        else:
            print(render(stats))
        return 0

    return _run(container, work)


def cli_actor(args: argparse.Namespace) -> str:
    """Who the audit log names: `cli:<--actor>` or `cli:<OS user>`."""
    given = getattr(args, "actor", None)
    if given is not None:
        return f"cli:{check_text('--actor', given.strip())}"
    try:
        return f"cli:{getpass.getuser()}"
    except (OSError, KeyError):  # no login name and no passwd entry (some containers)
        return f"cli:uid-{os.getuid()}"


def _selection(args: argparse.Namespace) -> Selection:
    return Selection.build(
        ids=args.id or (),
        statuses=getattr(args, "status", None) or (),
        event_key=args.key,
        event_name=args.event,
        since=args.since,
        until=args.until,
        id_range=getattr(args, "id_range", None),
    )


def _action(action: Action) -> Callable[[Container, argparse.Namespace], int]:
    def command(container: Container, args: argparse.Namespace) -> int:
        box = get_box(container.registry(), args.box)
        selection = _selection(args)
        actor = cli_actor(args)

        async def work(engine: AsyncEngine) -> int:
            result = await apply(engine, box, action, selection, dry_run=args.dry_run, actor=actor)
            print(result.describe())
            return 0

        return _run(container, work)

    return command


def cmd_purge(container: Container, args: argparse.Namespace) -> int:
    boxes = container.registry().select(args.box)
    actor = cli_actor(args)

    async def work(engine: AsyncEngine) -> int:
        for name, report in (await purge_now(engine, boxes, actor=actor)).items():
            print(
                f"purge {name}: deleted {report.delivered} delivered and "
                f"{report.failed_or_discarded} failed/discarded/parked items"
                + ("" if report.complete else " (another worker is purging it: stopped early)")
            )
        return 0

    return _run(container, work)


def _pause_target(container: Container, args: argparse.Namespace) -> dict[str, Any]:
    box = get_box(container.registry(), args.box)
    if args.bucket is not None and not 0 <= args.bucket < box.config.bucket_count:
        raise OpsError(f"box {box.name} has buckets 0-{box.config.bucket_count - 1}")
    return {"bucket": args.bucket, "event_key": check_text("key", args.key)}


def cmd_pause(container: Container, args: argparse.Namespace) -> int:
    from ..messaging.pauses import Pause, add_pause

    target = _pause_target(container, args)
    check_text("--reason", args.reason, 1000, allow_empty=True)
    actor = cli_actor(args)

    async def work(engine: AsyncEngine) -> int:
        added = await add_pause(engine, args.box, reason=args.reason, actor=actor, **target)
        what = Pause(args.box, **target).target
        print(f"paused {what}" if added else f"{what} was already paused")
        return 0

    return _run(container, work)


def cmd_resume(container: Container, args: argparse.Namespace) -> int:
    from ..messaging.pauses import Pause, remove_pause

    target = _pause_target(container, args)
    actor = cli_actor(args)

    async def work(engine: AsyncEngine) -> int:
        removed = await remove_pause(engine, args.box, every=args.all, actor=actor, **target)
        what = f"every pause of box {args.box}" if args.all else Pause(args.box, **target).target
        print(f"resumed {what} ({removed} pauses lifted)" if removed else f"{what} was not paused")
        return 0

    return _run(container, work)


def cmd_pauses(container: Container, args: argparse.Namespace) -> int:
    from ..messaging.pauses import list_pauses

    if args.box:
        get_box(container.registry(), args.box)

    async def work(engine: AsyncEngine) -> int:
        pauses = await list_pauses(engine, args.box)
        for pause in pauses:
            when = pause.created_at.isoformat() if pause.created_at else ""
            print(f"{pause.target}\t{when}\t{pause.reason}")
        if not pauses:
            print("nothing is paused")
        return 0

    return _run(container, work)


def cmd_audit(container: Container, args: argparse.Namespace) -> int:
    from ..messaging.audit import MAX_LIMIT, recent_audit

    if not 1 <= args.limit <= MAX_LIMIT:
        raise OpsError(f"--limit must be 1-{MAX_LIMIT}")
    if args.box:
        get_box(container.registry(), args.box)
    action = check_text("--action", args.action)

    async def work(engine: AsyncEngine) -> int:
        entries = await recent_audit(engine, args.limit, box=args.box, action=action)
        if args.json:
            print(json.dumps([e.as_json() for e in entries], indent=2))
            return 0
        for e in entries:
            selection = json.dumps(e.selection, sort_keys=True)
            print(
                f"{e.id}\t{e.at.isoformat()}\t{e.actor}\t{e.action}\t{e.box or '-'}\t"
                f"{e.affected}\t{selection}\t{e.detail or ''}"
            )
        if not entries:
            print("no audit rows match" if args.box or action else "the audit log is empty")
        return 0

    return _run(container, work)


def cmd_generate(container: Container, args: argparse.Namespace) -> int:
    from .generate import ProjectFiles, generate_item, generate_transport

    project = ProjectFiles.find(args.root)
    if args.what == "item":
        written = generate_item(project, args.name, args.kind)
    else:
        written = generate_transport(project, args.box, args.name, args.event)
    for path in written:
        print(f"wrote {path.relative_to(project.root)}")
    return 0


def _actor(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--actor", metavar="NAME", help="who the audit log names (default: the OS user)"
    )


def _filters(parser: argparse.ArgumentParser, *, statuses: str | None, id_range: bool) -> None:
    parser.add_argument("--box", required=True, help="the box (see check-config)")
    parser.add_argument("--id", action="append", metavar="ID", help="item id (repeatable)")
    if statuses:
        parser.add_argument(
            "--status",
            action="append",
            help=f"{statuses} (repeatable; default failed unless --id)",
        )
    if id_range:
        parser.add_argument("--id-range", metavar="FIRST:LAST", help="ids, both inclusive")
    parser.add_argument("--key", help="only items of this partition key")
    parser.add_argument("--event", help="only items of this event name")
    parser.add_argument("--since", metavar="ISO_TIME", help="created at or after")
    parser.add_argument("--until", metavar="ISO_TIME", help="created before")
    parser.add_argument("--dry-run", action="store_true", help="count, change nothing")
    _actor(parser)


def register(sub: Any) -> None:
    """Add the operator subcommands to the console script's subparsers."""
    stats = sub.add_parser("stats", help="per box: depth by status, lag, hot buckets/keys, errors")
    stats.add_argument("--box", action="append", help="only this box (repeatable)")
    stats.add_argument("--json", action="store_true", help="machine-readable output")
    stats.add_argument("--top", type=int, default=5, help="rows per top list (default 5)")
    stats.set_defaults(func=cmd_stats)

    retry = sub.add_parser("retry", help="make failed (or chosen) items pending again, now")
    _filters(retry, statuses="failed, parked, discarded or pending", id_range=False)
    retry.set_defaults(func=_action(RETRY))

    discard = sub.add_parser("discard", help="give up on failed (or chosen pending) items")
    _filters(discard, statuses="failed, parked or pending", id_range=False)
    discard.set_defaults(func=_action(DISCARD))

    replay = sub.add_parser("replay", help="send delivered items again (same message id)")
    _filters(replay, statuses=None, id_range=True)
    replay.set_defaults(func=_action(REPLAY))

    park = sub.add_parser(
        "park", help="move failed items (a blocked key's head) aside: their key moves on"
    )
    _filters(park, statuses="failed or pending", id_range=False)
    park.set_defaults(func=_action(PARK))

    purge = sub.add_parser("purge", help="apply the retention periods now")
    purge.add_argument("--box", action="append", help="only this box (repeatable)")
    _actor(purge)
    purge.set_defaults(func=cmd_purge)

    for name, func, text in (
        ("pause", cmd_pause, "stop relaying a box, one bucket or one key (kill switch)"),
        ("resume", cmd_resume, "lift a pause"),
    ):
        command = sub.add_parser(name, help=text)
        command.add_argument("--box", required=True)
        target = command.add_mutually_exclusive_group()
        target.add_argument("--bucket", type=int)
        target.add_argument("--key")
        if name == "pause":
            command.add_argument("--reason", default="", help="shown in stats and the admin page")
        else:
            target.add_argument("--all", action="store_true", help="every pause of the box")
        _actor(command)
        command.set_defaults(func=func)

    pauses = sub.add_parser("pauses", help="list the pauses in force")
    pauses.add_argument("--box")
    pauses.set_defaults(func=cmd_pauses)

    audit = sub.add_parser("audit", help="the operator audit log, newest first")
    audit.add_argument("--limit", type=int, default=20, help="rows (default 20, at most 1000)")
    audit.add_argument("--box", help="only actions on this box")
    audit.add_argument("--action", help="only this action (retry, discard, park, pause, ...)")
    audit.add_argument("--json", action="store_true", help="machine-readable output")
    audit.set_defaults(func=cmd_audit)

    generate = sub.add_parser("generate", help="add a box or a transport to this project")
    kinds = generate.add_subparsers(dest="what", required=True)
    item = kinds.add_parser("item", help="a new box: model, migration, config and transport")
    item.add_argument("name", help="e.g. audit_log -> box audit_log_outbox_item")
    item.add_argument("--kind", choices=("outbox", "inbox"), required=True)
    transport = kinds.add_parser("transport", help="a new transport class for a box")
    transport.add_argument("box")
    transport.add_argument("name", help="e.g. billing_webhook -> class BillingWebhookTransport")
    transport.add_argument("--event", help="only items of this event (default: every event)")
    for parser in (item, transport):
        parser.add_argument(
            "--root", default=None, help="the project directory (default: this one)"
        )
    generate.set_defaults(func=cmd_generate)
