"""The Debezium relay's commands: debezium-config, debezium-switch and debezium-status.

- `debezium-config` prints the connector's JSON (`{"name": ..., "config": {...}}`, what
  `PUT /connectors/NAME/config` takes wrapped as `POST /connectors` takes it); with
  `--register` it creates the publication and slot, puts the configuration on Kafka Connect
  and waits until the connector and its task run. It needs no box with `relay: debezium`:
  register first, then switch.
- `debezium-switch BOX --to debezium|worker` moves a box between the relays without losing an
  item or breaking per-key order (outbox_engine/debezium/switch.py), then says what to change
  in the boxes file.
- `debezium-status` shows each outbox box's relay, trigger, slot and capture, and exits 1
  when something is wrong, so a cron job or an alert can run it.

Exit codes, as the other commands: 0 done (status: all is well); 1 the connector failed or
did not start in time, or (status) something is wrong; 2 bad input or a setup PostgreSQL
refuses (wal_level, REPLICATION privilege, a foreign publication or slot); 3 PostgreSQL or
Kafka Connect cannot be reached. The names of the connector, slot and publication are the
service's (`debezium_names.py`).
"""

from __future__ import annotations

import json
import sys
import time
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from outbox_engine.operations.actions import get_box

from .console import confirm
from .context import plain, state
from .debezium_output import config_document, status_json, status_line
from .errors import OpsError
from .reach import EXIT_DECLINED, EXIT_UNREACHABLE

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine


PANEL = "Debezium relay (docs/debezium.md)"
PROG = "{{ cookiecutter.project_slug }}"


class Relay(StrEnum):
    debezium = "debezium"
    worker = "worker"


def _fail(message: str, code: int) -> typer.Exit:
    print(f"{PROG}: {message}", file=sys.stderr)
    return typer.Exit(code)


def _reminder(box: Any, to: Relay, boxes_file: str) -> str:
    configured = "debezium" if box.relayed_by_debezium else "worker"
    if configured == to.value:
        return (
            f"the boxes file already says relay: {to.value} for {box.name}; restart the "
            "workers that still run with an older copy"
        )
    return (
        f"now set `relay: {to.value}` for box {box.name} in {boxes_file} and restart the "
        f"workers (until then they {'find nothing pending in it' if to is Relay.debezium else 'do not relay it'})"
    )


def register(app: typer.Typer) -> None:
    """Add debezium-config, debezium-switch and debezium-status to the console script."""

    @app.command("debezium-config", rich_help_panel=PANEL)
    def debezium_config(
        ctx: typer.Context,
        register_: Annotated[
            bool,
            typer.Option(
                "--register",
                help="Create the publication and slot, put the connector on Kafka Connect and "
                "wait until it runs (instead of printing the JSON).",
            ),
        ] = False,
        connect_url: Annotated[
            str | None,
            typer.Option(
                "--connect-url",
                envvar="CONNECT_URL",
                help="Kafka Connect's REST URL, e.g. http://connect:8083 (env CONNECT_URL).",
                show_default=False,
            ),
        ] = None,
        database_url: Annotated[
            str | None,
            typer.Option(
                "--database-url",
                help="How Connect reaches PostgreSQL (default: DATABASE_URL).",
                show_default=False,
            ),
        ] = None,
        timeout: Annotated[
            float, typer.Option("--timeout", min=1, help="Seconds to wait for RUNNING.")
        ] = 120.0,
    ) -> None:
        """Print the Debezium connector's configuration, or --register it on Kafka Connect."""
        from outbox_engine.debezium.register import ConnectError, ConnectUnreachable
        from outbox_engine.debezium.register import register as put_connector
        from outbox_engine.store.slots import ReplicationSetupError

        from ..debezium_names import debezium_names

        cli = state(ctx)
        settings = cli.container().settings()
        names = debezium_names(settings)
        document = config_document(names, database_url or plain(settings.database_url))
        if not register_:
            print(json.dumps(document, indent=2))
            return
        if not connect_url:
            raise OpsError("--register needs Kafka Connect's URL: --connect-url or CONNECT_URL")

        async def work(engine: AsyncEngine) -> Any:
            return await put_connector(engine, connect_url, names, document["config"], timeout)

        try:
            done = cli.run(work)
        except ReplicationSetupError as exc:
            raise OpsError(str(exc)) from None
        except ConnectUnreachable as exc:
            raise _fail(f"{exc}; check --connect-url (CONNECT_URL)", EXIT_UNREACHABLE) from None
        except ConnectError as exc:
            raise _fail(str(exc), EXIT_DECLINED) from None
        made = ", ".join(
            f"{what} {name} {'created' if created else 'already there'}"
            for what, name, created in (
                ("publication", names.publication, done.publication_created),
                ("slot", names.slot, done.slot_created),
            )
        )
        print(
            f"connector {names.connector} RUNNING on {connect_url} after {done.seconds:.1f} s; "
            f"{made}"
        )

    @app.command("debezium-switch", rich_help_panel=PANEL)
    def debezium_switch(
        ctx: typer.Context,
        box: Annotated[str, typer.Argument(metavar="BOX", help="The outbox box to switch.")],
        to: Annotated[Relay, typer.Option("--to", help="Who relays the box from now on.")],
        timeout: Annotated[
            float,
            typer.Option(
                "--timeout",
                min=1,
                help="--to worker: seconds to wait for Debezium to confirm what it captured.",
            ),
        ] = 300.0,
        yes: Annotated[
            bool,
            typer.Option("--yes", "-y", help="Switch without asking (required without a TTY)."),
        ] = False,
    ) -> None:
        """Move a box between the worker and Debezium without losing an item or breaking order."""
        from outbox_engine.debezium.switch import (
            SwitchRefused,
            switch_to_debezium,
            switch_to_worker,
        )

        from ..debezium_names import debezium_names

        cli = state(ctx)
        container = cli.container()
        names = debezium_names(container.settings())
        found = get_box(container.registry(), box)
        if found.kind != "outbox":
            raise OpsError(
                f"box {found.name} is an inbox box: only outbox boxes are relayed by Debezium"
            )
        if to is Relay.debezium:
            from outbox_engine.debezium.connector import debezium_topic

            debezium_topic(found)  # a box Debezium cannot relay: ConfigError (exit 2), first
        confirm(f"switch box {found.name} to {to.value}?", yes=yes)
        started = time.monotonic()

        async def work(engine: AsyncEngine) -> Any:
            if to is Relay.debezium:
                return await switch_to_debezium(engine, found, names)
            return await switch_to_worker(engine, found, names, timeout)

        try:
            report = cli.run(work)
        except SwitchRefused as exc:
            raise OpsError(str(exc)) from None
        seconds = time.monotonic() - started
        if to is Relay.debezium:
            already = " (the capture trigger was already there)" if report.was_captured else ""
            print(
                f"box {found.name} switched to Debezium in {seconds:.1f} s: {report.copied} "
                f"pending items handed over in id order; capture trigger installed{already}"
            )
            if report.failed_left:
                print(f"{report.failed_left} items failed for good stay as they are")
        else:
            waited = (
                f"Debezium confirmed WAL position {report.lsn} after {report.waited_s:.1f} s"
                if report.was_captured
                else "there was no capture trigger"
            )
            print(
                f"box {found.name} switched to the worker in {seconds:.1f} s: capture trigger "
                f"dropped; {waited}"
            )
        print(_reminder(found, to, str(container.settings().boxes_file)))

    @app.command("debezium-status", rich_help_panel=PANEL)
    def debezium_status_command(
        ctx: typer.Context,
        json_: Annotated[
            bool, typer.Option("--json", help="Machine-readable output (JSON).")
        ] = False,
    ) -> None:
        """Per outbox box: relay, trigger, slot, lag, capture rows; exit 1 when something is wrong."""
        from outbox_engine.debezium.status import debezium_status
        from outbox_engine.store.capture_reads import capture_rows

        from ..debezium_names import debezium_names

        cli = state(ctx)
        boxes = cli.container().registry().select(None, "outbox")
        names = debezium_names(cli.container().settings())

        async def work(engine: AsyncEngine) -> list[dict[str, Any]]:
            statuses = await debezium_status(engine, boxes, names)
            async with engine.connect() as conn:
                rows = await capture_rows(conn)
                await conn.rollback()
            return [status_json(s, rows[s.box].rows if s.box in rows else 0) for s in statuses]

        found = cli.run(work)
        if json_:
            print(json.dumps(found, indent=2))
        else:
            for entry in found:
                print(status_line(entry, names.slot))
        if any(entry["problems"] for entry in found):
            raise typer.Exit(EXIT_DECLINED)
