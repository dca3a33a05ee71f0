"""The CLI's own parsing, without services: probe ports, the outage line's address (never the
password), which exceptions count as an outage, and exit code 2 for a bad --probe-port."""

from __future__ import annotations

import errno
import logging

import pytest

from {{ cookiecutter.package_name }} import cli
from {{ cookiecutter.package_name }}.ops.errors import OpsError
from {{ cookiecutter.package_name }}.ops.reach import database_address, describe_outage
from {{ cookiecutter.package_name }}.ops.service_commands import probe_port

PROG = "{{ cookiecutter.project_slug }}"
URL = "postgresql+asyncpg://app:s3cret@db.internal:6543/orders"


@pytest.mark.parametrize(
    ("given", "configured", "expected"),
    [
        (None, 8081, 8081),
        (None, 0, None),  # the setting 0: off
        ("0", 8081, None),
        ("auto", 8081, 0),  # the probe server binds port 0: the kernel picks a free one
        (" AUTO ", 8081, 0),
        ("8091", 8081, 8091),
        ("65535", 8081, 65535),
    ],
)
def test_probe_port_values(given: str | None, configured: int, expected: int | None) -> None:
    assert probe_port(given, configured) == expected


@pytest.mark.parametrize("given", ["65536", "-1", "eighty", "8O81", "\u0668\u0660", ""])
def test_bad_probe_ports_are_refused(given: str) -> None:
    with pytest.raises(OpsError, match="--probe-port must be 0-65535 or auto"):
        probe_port(given, 8081)


def test_the_address_never_shows_the_password() -> None:
    assert database_address(URL) == "app@db.internal:6543/orders"
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed")
    try:
        try:
            raise refused
        except OSError as exc:
            raise RuntimeError("wrapped by the driver") from exc
    except RuntimeError as outer:
        line = describe_outage(outer, database_url=URL)
    assert line is not None
    assert line.startswith("cannot reach PostgreSQL at app@db.internal:6543/orders: ")
    assert "connection refused" in line
    assert "s3cret" not in line


@pytest.mark.parametrize(
    "error",
    [FileNotFoundError(errno.ENOENT, "no such file"), ValueError("bug"), KeyError("x")],
)
def test_other_errors_are_not_outages(error: Exception) -> None:
    assert describe_outage(error, database_url=URL, kafka_servers="k:9092") is None


def test_a_bad_probe_port_exits_2_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", URL)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "k:9092")
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        assert cli.main(["worker", "--probe-port", "eighty"]) == 2
    finally:  # main configures the root logger: leave it as the other tests found it
        root.handlers[:] = handlers
        root.setLevel(level)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"{PROG}: --probe-port must be 0-65535 or auto, not 'eighty'"]
