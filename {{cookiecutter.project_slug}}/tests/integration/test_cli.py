"""The console script as a new user meets it: help for every command and option, --version,
completion, check-config without database settings, and one clear line with exit code 3 for
a PostgreSQL that is down or refuses the login (no traceback)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from typing import Any

import pytest
import typer
from sqlalchemy.engine import make_url

from {{ cookiecutter.package_name }}.cli import app
from {{ cookiecutter.package_name }}.container import Container

from ..ops_support import run_cli
from ..support import OUTBOX_BOX, service_env

PROG = "{{ cookiecutter.project_slug }}"


def _walk(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every command of the tree (groups too), with its path of names."""
    found = [(path, command)]
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        found.extend(_walk(sub, (*path, name)))
    return found


def test_every_command_has_a_description_and_every_option_a_help_text() -> None:
    root = typer.main.get_command(app)
    commands = _walk(root)
    assert len(commands) >= 20  # 18 commands, the generate group and its 2, the root
    missing: list[str] = []
    for path, command in commands:
        name = " ".join(path) or PROG
        if not (command.help or "").strip():
            missing.append(f"{name}: no description")
        for param in command.params:
            if param.param_type_name == "option" and not (param.help or "").strip():
                missing.append(f"{name} {param.opts[0]}: no help")
            if param.param_type_name == "argument" and not (getattr(param, "help", "") or ""):
                missing.append(f"{name} {param.name}: no help")
    assert missing == []


def test_options_with_a_default_show_it_in_the_help() -> None:
    result = run_cli("retry", "--help", env=dict(os.environ, COLUMNS="200"))
    assert result.returncode == 0, result.stderr
    assert re.search(r"--batch-size .*\[default: 1000\]", result.stdout)
    assert re.search(r"--after-id .*\[default: 0\]", result.stdout)
    worker = run_cli("worker", "--help", env=dict(os.environ, COLUMNS="200")).stdout
    assert re.search(r"--concurrency .*\[default: 2\]", worker)
    assert re.search(r"--join-lanes .*Lane 0 claims for every lane", worker)
    assert "--probe-port" in worker
    assert "auto" in worker


def test_top_level_help_names_the_environment_and_exit_codes() -> None:
    result = run_cli("--help", env=dict(os.environ, COLUMNS="200"))
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for word in ("DATABASE_URL", "KAFKA_BOOTSTRAP_SERVERS", "BOXES_FILE", ".env", "check-config"):
        assert word in text, word
    assert "3 PostgreSQL or Kafka unreachable" in text
    assert "--install-completion" in text
    assert "--show-completion" in text


def test_version_is_the_package_version() -> None:
    result = run_cli("--version", env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{PROG} {version(PROG)}"


def test_completion_script_for_bash() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "{{ cookiecutter.package_name }}.cli", "--show-completion", "bash"],
        env=dict(os.environ, _TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "_{{ cookiecutter.package_name.upper() }}_COMPLETE" in result.stdout
    assert "complete " in result.stdout


def test_check_config_needs_no_database_or_kafka_settings(tmp_path: Any) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "KAFKA_BOOTSTRAP_SERVERS", "BOXES_FILE")
    }
    result = run_cli("check-config", env=env, cwd=tmp_path)  # tmp_path: no .env there
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("outbox {{ cookiecutter.outbox_item }}_outbox_item: ")


def test_missing_settings_stop_the_process_with_their_names(tmp_path: Any) -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "KAFKA_BOOTSTRAP_SERVERS")
    }
    result = run_cli("stats", env=env, cwd=tmp_path)
    assert result.returncode == 2
    assert "DATABASE_URL is not set" in result.stderr
    assert "KAFKA_BOOTSTRAP_SERVERS is not set" in result.stderr
    assert "Traceback" not in result.stderr


def test_check_config_lists_the_boxes(container: Container) -> None:
    result = run_cli("check-config", env=service_env(container))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("outbox {{ cookiecutter.outbox_item }}_outbox_item: table {{ cookiecutter.outbox_item }}_outbox_items, {{ cookiecutter.bucket_count }} buckets")
    assert lines[1].startswith("inbox  {{ cookiecutter.inbox_item }}_inbox_item: table {{ cookiecutter.inbox_item }}_inbox_items")


def test_a_broken_boxes_file_is_reported_with_its_key(
    container: Container, tmp_path: object
) -> None:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    broken = tmp_path / "boxes.yaml"
    broken.write_text("outbox:\n  x_box:\n    item_class: nope\n    transports: []\n")
    result = run_cli("check-config", env=service_env(container, BOXES_FILE=str(broken)))
    assert result.returncode == 2
    assert "outbox.x_box.item_class" in result.stderr
    assert "outbox.x_box.transports" in result.stderr


def test_an_unknown_box_is_refused(container: Container) -> None:
    result = run_cli("worker", "--box", "nope", env=service_env(container))
    assert result.returncode == 2
    assert "unknown box 'nope'" in result.stderr


@pytest.mark.parametrize("command", ["worker", "consumer"])
@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        (
            "KAFKA_CONFIG__LINGER__MS",
            "soon-q9",
            'Invalid value for configuration property "queue.buffering.max.ms"',
        ),
        (
            "KAFKA_CONFIG__NO__SUCH__PROPERTY",
            "value-q9",
            'No such configuration property: "no.such.property"',
        ),
        (  # librdkafka quotes this value: the line must not (values are secrets)
            "KAFKA_CONFIG__SECURITY__PROTOCOL",
            "bogus-protocol-x7",
            'Invalid value "***" for configuration property "security.protocol"',
        ),
    ],
    ids=["bad-value", "unknown-name", "quoted-value"],
)
def test_a_kafka_setting_librdkafka_refuses_is_one_line_and_exit_2(
    container: Container, command: str, variable: str, value: str, said: str
) -> None:
    env = service_env(
        container, **{variable: value, "WORKER_PROBE_PORT": "0", "CONSUMER_PROBE_PORT": "0"}
    )
    result = run_cli(command, env=env)
    assert result.returncode == 2, result.stderr[-2000:]
    assert said in result.stderr
    assert "KAFKA_CONFIG__" in result.stderr
    assert value not in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["worker", "consumer"])
def test_event_loop_uvloop_without_uvloop_is_one_line_and_exit_2(
    container: Container, command: str, tmp_path: Any
) -> None:
    """EVENT_LOOP=uvloop where uvloop cannot be imported (a module first on the path that
    refuses, as on a platform without it): the setting named, exit 2, no traceback."""
    (tmp_path / "uvloop.py").write_text("raise ImportError('not built for this platform')\n")
    env = service_env(
        container,
        EVENT_LOOP="uvloop",
        PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])),
        WORKER_PROBE_PORT="0",
        CONSUMER_PROBE_PORT="0",
    )
    result = run_cli(command, env=env)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "EVENT_LOOP=uvloop, but uvloop cannot be imported" in result.stderr
    assert "not built for this platform" in result.stderr
    assert "Traceback" not in result.stderr


def test_migrate_is_idempotent(container: Container) -> None:
    result = run_cli("migrate", env=service_env(container))
    assert result.returncode == 0, result.stderr


# -- a PostgreSQL that cannot be reached ---------------------------------------------------

OUTAGE_COMMANDS: list[tuple[str, ...]] = [
    ("migrate",),
    ("stats",),
    ("purge", "--yes"),
    ("pauses",),
    ("retry", "--box", OUTBOX_BOX, "--yes"),
    ("replay", "--box", OUTBOX_BOX, "--key", "1", "--yes"),
    ("audit",),
]


def _outage_env(container: Container, url: str) -> dict[str, str]:
    return service_env(container, DATABASE_URL=url)


@pytest.mark.parametrize("where", ["closed port", "wrong password"])
def test_an_unreachable_database_is_one_line_and_exit_3(container: Container, where: str) -> None:
    real = make_url(container.settings().database_url)
    if where == "closed port":
        url = real.set(host="127.0.0.1", port=1).render_as_string(hide_password=False)
        expected = "cannot reach PostgreSQL at "
        address = f"@127.0.0.1:1/{real.database}"
    else:
        url = real.set(password="not-the-password").render_as_string(hide_password=False)
        expected = "refused the connection: password authentication failed"
        address = f"@{real.host}:{real.port}/{real.database}"
    env = _outage_env(container, url)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda args: run_cli(*args, env=env), OUTAGE_COMMANDS))
    for args, result in zip(OUTAGE_COMMANDS, results, strict=True):
        assert result.returncode == 3, (args, result.stderr[-2000:])
        assert "Traceback" not in result.stderr, args
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, (args, lines)
        assert lines[0].startswith(f"{PROG}: "), lines
        assert expected in lines[0], (args, lines[0])
        assert address in lines[0], (args, lines[0])
        assert "not-the-password" not in lines[0]
        assert "DATABASE_URL" in lines[0]  # what to check
