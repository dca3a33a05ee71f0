"""The `{{ cookiecutter.project_slug }}` console script (Typer): the service's processes
(migrate, api, worker, consumer, backfill, check-config) and the operator commands (`ops/`).

`main` runs it and turns every failure a user can cause or meet into one line on stderr and
a documented exit code (`ops/reach.py`): 2 for a bad command line, settings, boxes file or
input, 3 for a PostgreSQL or Kafka that cannot be reached, 130 for Ctrl-C. Anything else is
a bug and keeps its traceback.
"""

import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated

import typer

from outbox_engine.config.boxes import ConfigError
from outbox_engine.observability.probes import ProbePortTaken

from .ops import bulk_commands, commands, debezium_commands, purge_command, service_commands
from .ops.bulk_commands import StoppedRun
from .ops.console import ConfirmationRefused
from .ops.context import CliState
from .ops.errors import OpsError
from .ops.reach import EXIT_INTERRUPTED, EXIT_UNREACHABLE, EXIT_USAGE, describe_outage
from .settings import SettingsError

PROG = "{{ cookiecutter.project_slug }}"
DESCRIPTION = "{{ cookiecutter.description }}"
HELP = (
    f"{DESCRIPTION}\n\n"
    "Environment (the process environment, and a .env file in the working directory):\n\n"
    "DATABASE_URL (postgresql+asyncpg://user:password@host:5432/db) and "
    "KAFKA_BOOTSTRAP_SERVERS (host:port, comma-separated) are required by every command "
    "except check-config, generate and asyncapi; Kafka is used by worker, consumer and api. "
    "BOXES_FILE (default config/boxes.yaml) is read by every command except migrate and "
    "generate; check-config needs nothing else.\n\n"
    "Exit codes: 0 done; 1 not confirmed, or a check found a problem (debezium-status, "
    "a connector that failed); 2 bad command line, settings, boxes file or input; "
    "3 PostgreSQL or Kafka unreachable or refusing the login (or Kafka Connect unreachable); "
    "130 interrupted (the resume position is printed). See docs/operations.md."
)

app = typer.Typer(
    name=PROG,
    help=HELP,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)


def package_version() -> str:
    try:
        return version(PROG)
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _show_version(value: bool) -> None:
    if value:
        print(f"{PROG} {package_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    show_version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_show_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    ctx.ensure_object(CliState)


service_commands.register(app)
commands.register(app)
bulk_commands.register(app)
purge_command.register(app)
debezium_commands.register(app)


def _fail(message: object) -> None:
    print(f"{PROG}: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the console script on `argv` (default: sys.argv); return the exit code."""
    cli_state = CliState()
    command = typer.main.get_command(app)
    try:
        result = command.main(
            args=list(argv) if argv is not None else None,
            prog_name=PROG,
            standalone_mode=False,
            obj=cli_state,
        )
    except typer.Abort:
        _fail("aborted")
        return EXIT_INTERRUPTED
    except typer.TyperException as exc:  # usage errors: Typer prints usage and the problem
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            _fail(exc)
        return int(getattr(exc, "exit_code", EXIT_USAGE))
    except ConfirmationRefused as exc:
        _fail(exc)
        return exc.exit_code
    except (SettingsError, ConfigError, OpsError, ProbePortTaken) as exc:
        _fail(exc)
        return EXIT_USAGE
    except StoppedRun as exc:
        line = describe_outage(
            exc.cause, database_url=cli_state.database_url, kafka_servers=cli_state.kafka_servers
        )
        _fail(f"{line or exc.cause!r}; {exc.resume}")
        if line is None:
            raise
        return EXIT_UNREACHABLE
    except Exception as exc:
        line = describe_outage(
            exc, database_url=cli_state.database_url, kafka_servers=cli_state.kafka_servers
        )
        if line is None:
            raise
        _fail(line)
        return EXIT_UNREACHABLE
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
