"""Input checks that need no services: settings that name the bad variable, operator
selections parsed strictly, JSON bodies the API refuses, 422 replies that echo nothing, and
failure texts that carry no statement, parameters or values."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy.exc import DBAPIError, IntegrityError

from {{ cookiecutter.package_name }}.api.body_guard import json_problem
from {{ cookiecutter.package_name }}.api.validation import public_errors
from {{ cookiecutter.package_name }}.settings import SettingsError, load_settings
from outbox_engine.operations.errors import OpsError
from outbox_engine.operations.selection import Selection, check_text, parse_id, parse_status
from outbox_engine.relay.failures import failure_text, is_permanent
from outbox_engine.store.status import ItemStatus
from outbox_engine.transports.base import PermanentFailure


@pytest.fixture
def base_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("ADMIN_TOKEN", "ADMIN_TOKEN_FILE", "LOG_LEVEL", "PROBE_HOST", "API_DOCS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABASE_URL", "postgresql+asyncpg://u:p@db:5432/app")
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "k:9092")
    return monkeypatch


# -- settings ------------------------------------------------------------------------------


@pytest.mark.parametrize("level", ["LOUD", "", "info;", "10"])
def test_an_invalid_log_level_is_named(base_env: pytest.MonkeyPatch, level: str) -> None:
    base_env.setenv("LOG_LEVEL", level)
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert str(info.value) == (
        "invalid settings: LOG_LEVEL is invalid: Value error, "
        "must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL"
    )


def test_log_level_is_case_insensitive(base_env: pytest.MonkeyPatch) -> None:
    base_env.setenv("LOG_LEVEL", " warning ")
    assert load_settings().log_level == "WARNING"


def test_a_short_admin_token_is_refused_without_showing_it(base_env: pytest.MonkeyPatch) -> None:
    base_env.setenv("ADMIN_TOKEN", "hunter2-hunter2")  # 15 characters
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert str(info.value) == (
        "invalid settings: ADMIN_TOKEN is invalid: Value error, must be at least 16 characters"
    )
    assert "hunter2" not in str(info.value)


def test_an_admin_token_with_spaces_or_non_ascii_is_refused(
    base_env: pytest.MonkeyPatch,
) -> None:
    for token in ("a long token with spaces", "sechzehn-zeichen-\u00fc\u00fc\u00fc"):
        base_env.setenv("ADMIN_TOKEN", token)
        with pytest.raises(SettingsError, match=r"ADMIN_TOKEN is invalid: .*printable ASCII"):
            load_settings()


def test_admin_token_of_16_characters_is_accepted_and_empty_means_disabled(
    base_env: pytest.MonkeyPatch,
) -> None:
    base_env.setenv("ADMIN_TOKEN", "0123456789abcdef")
    assert load_settings().admin_token == "0123456789abcdef"
    base_env.setenv("ADMIN_TOKEN", "")
    assert load_settings().admin_token is None


def test_hardening_defaults(base_env: pytest.MonkeyPatch) -> None:
    settings = load_settings()
    assert settings.probe_host == "127.0.0.1"
    assert settings.api_docs is False
    assert settings.api_max_body_bytes == 1024 * 1024
    base_env.setenv("API_MAX_BODY_BYTES", "0")
    with pytest.raises(SettingsError, match="API_MAX_BODY_BYTES is invalid"):
        load_settings()


# -- operator selections ---------------------------------------------------------------------


@pytest.mark.parametrize("value", ["²", "1²", "٣", "\uff11", "9" * 5000, "1_0", " +1", "0x1"])
def test_ids_are_ascii_digits_only(value: str) -> None:
    with pytest.raises(OpsError, match="malformed item id"):
        parse_id(value)


def test_ids_beyond_bigint_are_refused() -> None:
    assert parse_id("9223372036854775807") == 2**63 - 1
    with pytest.raises(OpsError, match="ids are integers 1-9223372036854775807"):
        parse_id("9223372036854775808")


@pytest.mark.parametrize("value", ["²", "¹", "٢", "1" * 5000])
def test_statuses_by_number_are_ascii_digits_only(value: str) -> None:
    with pytest.raises(OpsError, match="unknown status"):
        parse_status(value)
    assert parse_status("1") is ItemStatus.FAILED


def test_a_refused_value_is_shown_short() -> None:
    with pytest.raises(OpsError) as info:
        parse_id("7" * 100_000)
    assert len(str(info.value)) < 120


def test_since_and_until_must_agree_on_offsets() -> None:
    for since, until in (
        ("2026-01-01T00:00:00", "2026-02-01T00:00:00+00:00"),
        ("2026-01-01T00:00:00+02:00", "2026-02-01T00:00:00"),
    ):
        with pytest.raises(OpsError, match="since and until: give both with a UTC offset"):
            Selection.build(since=since, until=until)
    naive = datetime(2026, 1, 1)
    aware = datetime(2026, 2, 1, tzinfo=UTC)
    with pytest.raises(OpsError, match="since and until"):
        Selection.build(since=naive, until=aware)
    both_naive = Selection.build(since="2026-01-01T00:00:00", until="2026-01-02T00:00:00")
    assert both_naive.since == datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("since", "message"),
    [
        ("9999-12-31T23:00:00-05:00", "since: time out of range"),
        ("0001-01-01T00:30:00+01:00", "since: time out of range"),
        ("10000-01-01T00:00:00", "since: malformed time"),
        ("2026-02-30T00:00:00", "since: malformed time"),
        ("2026-01-0²", "since: malformed time"),
    ],
)
def test_times_out_of_range_are_refused(since: str, message: str) -> None:
    with pytest.raises(OpsError, match=message):
        Selection.build(since=since)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("a\x00b", "key must not contain NUL characters"),
        ("a\ud800b", "key must be valid UTF-8 text"),
        ("x\udcff", "key must be valid UTF-8 text"),  # an undecodable byte in argv
        ("", "key must be 1-255 characters"),
        ("k" * 256, "key must be 1-255 characters"),
    ],
)
def test_text_filters_must_be_storable(value: str, message: str) -> None:
    with pytest.raises(OpsError, match=message):
        check_text("key", value)
    with pytest.raises(OpsError, match=message.replace("key", "event")):
        Selection.build(event_name=value)


# -- JSON bodies and 422 replies ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "where", "why"),
    [
        (b'{"amount": NaN}', [], "non-finite number NaN is not allowed"),
        (b'{"amount": Infinity}', [], "non-finite number Infinity is not allowed"),
        (b'{"a": [1, -Infinity]}', [], "non-finite number -Infinity is not allowed"),
        (b'{"amount": 1e400}', [], "number out of range (it is infinite as a float)"),
        (b'{"customer_id": "a\\u0000b"}', ["customer_id"], "text must not contain NUL"),
        (b'{"x": {"key": ["ok", "\\ud800"]}}', ["x", "key", 1], "unpaired surrogates"),
        (b'{"\\udfff": 1}', [], "unpaired surrogates"),
        (b"[" * 100_000 + b"]" * 100_000, [], "JSON nested too deeply"),
    ],
)
def test_json_bodies_the_api_refuses(body: bytes, where: list[object], why: str) -> None:
    problem = json_problem(body)
    assert problem is not None
    assert problem[0] == where
    assert why in problem[1]


@pytest.mark.parametrize(
    "body", [b'{"amount": 1e300, "customer_id": "\\u00e9\\ud83d\\ude00"}', b"not json", b"{"]
)
def test_json_the_guard_leaves_to_fastapi(body: bytes) -> None:
    assert json_problem(body) is None


def test_validation_errors_never_echo_the_input() -> None:
    huge = "x" * 2_000_000
    errors = [
        {
            "type": "string_too_long",
            "loc": ("body", "customer_id"),
            "msg": "String should have at most 255 characters",
            "input": huge,
            "ctx": {"max_length": 255},
        },
        {"type": "int_parsing", "loc": ("path", "k" * 500 + "\ud800"), "msg": "m" * 5000},
    ]
    shown = public_errors(errors)
    assert shown[0] == {
        "loc": ["body", "customer_id"],
        "msg": "String should have at most 255 characters",
        "type": "string_too_long",
    }
    assert len(shown[1]["loc"][1]) == 64
    assert len(shown[1]["msg"]) == 200
    assert len(repr(shown)) < 1000


# -- failure texts -------------------------------------------------------------------------------


def _wrapped(driver_error: BaseException, statement: str, params: tuple[str, ...]) -> DBAPIError:
    """A SQLAlchemy error around a driver error, as a handler's session raises it."""
    return IntegrityError(statement, params, driver_error)


def test_a_database_error_keeps_class_sqlstate_and_first_line_only() -> None:
    server = asyncpg.UniqueViolationError('duplicate key value violates unique constraint "k"')
    server.sqlstate = "23505"
    exc = _wrapped(server, "INSERT INTO t (v) VALUES ($1)", ("secret-value-1",))
    assert "secret-value-1" in str(exc)  # what SQLAlchemy would have stored
    text = failure_text(exc)
    assert text == (
        'UniqueViolationError (SQLSTATE 23505): duplicate key value violates unique constraint "k"'
    )
    assert is_permanent(exc)


def test_values_quoted_in_a_data_error_are_left_out() -> None:
    server = asyncpg.InvalidTextRepresentationError(
        'invalid input syntax for type integer: "secret-value-2"'
    )
    server.sqlstate = "22P02"
    text = failure_text(_wrapped(server, "SELECT $1::int", ("secret-value-2",)))
    assert text == (
        'InvalidTextRepresentationError (SQLSTATE 22P02): invalid input syntax for type integer: "…"'
    )


def test_a_wrapped_statement_is_cut_from_any_error() -> None:
    exc = RuntimeError("could not pay [SQL: UPDATE orders SET x = $1] [parameters: ('s3',)]")
    assert failure_text(exc) == "RuntimeError: could not pay"
    assert failure_text(PermanentFailure("order 7 does not exist")) == (
        "PermanentFailure: order 7 does not exist"
    )
    assert not is_permanent(RuntimeError("x"))
    connection_lost = asyncpg.ConnectionDoesNotExistError("connection was closed")
    connection_lost.sqlstate = "08003"
    assert not is_permanent(connection_lost)
