"""Settings: `.env` read (real environment wins), secrets never shown (repr, str, errors),
`*_FILE` variants, and Kafka extra config that carries any value."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from {{ cookiecutter.package_name }}.settings import (
    Settings,
    SettingsError,
    export_dotenv,
    load_settings,
)

PASSWORD = "pw-Zq8x-never-shown"
TOKEN = "tok-3f9a1c7e-never-shown"
SASL = "sasl-k2j4-never-shown"
VARIABLES = (
    "DATABASE_URL",
    "DATABASE_URL_FILE",
    "KAFKA_BOOTSTRAP_SERVERS",
    "KAFKA_EXTRA_CONFIG",
    "KAFKA_EXTRA_CONFIG_FILE",
    "ADMIN_TOKEN",
    "ADMIN_TOKEN_FILE",
    "LOG_LEVEL",
    "EVENT_LOOP",
)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """A clean environment in an empty working directory (its own `.env`, none yet)."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(Settings.model_config, "env_file", ".env")
    return monkeypatch


def test_missing_settings_are_named(env: pytest.MonkeyPatch) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert "DATABASE_URL is not set" in str(info.value)
    assert "KAFKA_BOOTSTRAP_SERVERS is not set" in str(info.value)


def test_malformed_settings_are_named(env: pytest.MonkeyPatch) -> None:
    env.setenv("DATABASE_URL", "mysql://x")
    env.setenv("KAFKA_BOOTSTRAP_SERVERS", "no-port")
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert "DATABASE_URL is invalid" in str(info.value)
    assert "KAFKA_BOOTSTRAP_SERVERS is invalid" in str(info.value)


def test_gc_threshold_defaults_and_refuses_a_negative(env: pytest.MonkeyPatch) -> None:
    env.setenv("DATABASE_URL", "postgresql+asyncpg://u:p@db:5432/app")
    env.setenv("KAFKA_BOOTSTRAP_SERVERS", "k1:9092")
    assert load_settings().gc_threshold == 10_000
    env.setenv("GC_THRESHOLD", "0")
    assert load_settings().gc_threshold == 0
    env.setenv("GC_THRESHOLD", "-5")
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert "GC_THRESHOLD is invalid" in str(info.value)


def test_event_loop_defaults_to_auto_and_refuses_another_name(env: pytest.MonkeyPatch) -> None:
    env.setenv("DATABASE_URL", "postgresql+asyncpg://u:p@db:5432/app")
    env.setenv("KAFKA_BOOTSTRAP_SERVERS", "k1:9092")
    assert load_settings().event_loop == "auto"
    env.setenv("EVENT_LOOP", "asyncio")
    assert load_settings().event_loop == "asyncio"
    env.setenv("EVENT_LOOP", "trio")
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert "EVENT_LOOP is invalid" in str(info.value)
    assert "'auto', 'uvloop' or 'asyncio'" in str(info.value)


def test_valid_settings(env: pytest.MonkeyPatch) -> None:
    env.setenv("DATABASE_URL", "postgresql+asyncpg://u:p@db:5432/app")
    env.setenv("KAFKA_BOOTSTRAP_SERVERS", "k1:9092, k2:9092")
    env.setenv("KAFKA_EXTRA_CONFIG", "security.protocol=SASL_SSL")
    settings = load_settings()
    assert settings.database_url == "postgresql+asyncpg://u:p@db:5432/app"
    assert settings.asyncpg_dsn == "postgresql://u:p@db:5432/app"
    assert settings.kafka_config() == {
        "bootstrap.servers": "k1:9092,k2:9092",
        "security.protocol": "SASL_SSL",
    }


# -- .env ----------------------------------------------------------------------------------


def test_dot_env_is_read_and_the_real_environment_wins(env: pytest.MonkeyPatch) -> None:
    Path(".env").write_text(
        "# a comment\n"
        "DATABASE_URL=postgresql+asyncpg://u:p@from-dotenv:5432/app\n"
        "KAFKA_BOOTSTRAP_SERVERS=dotenv:9092\n"
        "LOG_LEVEL=debug\n"
        "KAFKA_CONFIG__SSL__CIPHER__SUITES=A,B\n"
    )
    settings = load_settings()
    assert settings.database_url == "postgresql+asyncpg://u:p@from-dotenv:5432/app"
    assert settings.log_level == "DEBUG"
    assert settings.kafka_config() == {
        "bootstrap.servers": "dotenv:9092",
        "ssl.cipher.suites": "A,B",
    }
    env.setenv("KAFKA_BOOTSTRAP_SERVERS", "real-env:9092")
    env.setenv("KAFKA_CONFIG__SSL__CIPHER__SUITES", "C")
    settings = load_settings()
    assert settings.kafka_config() == {
        "bootstrap.servers": "real-env:9092",
        "ssl.cipher.suites": "C",
    }
    assert settings.log_level == "DEBUG"  # not in the environment: still from .env


def test_without_a_dot_env_file_nothing_changes(env: pytest.MonkeyPatch) -> None:
    env.setenv("DATABASE_URL", "postgresql+asyncpg://u:p@db:5432/app")
    env.setenv("KAFKA_BOOTSTRAP_SERVERS", "k:9092")
    assert not Path(".env").exists()
    assert load_settings().log_level == "INFO"


def test_export_dotenv_fills_only_what_the_environment_lacks(env: pytest.MonkeyPatch) -> None:
    """For what reads os.environ itself (`${NAME}` in the boxes file, OTEL_*)."""
    for name in ("H2_TOPIC", "H2_KEPT"):
        env.setenv(name, "x")  # so that the test's end restores them (absent)
        env.delenv(name)
    env.setenv("H2_KEPT", "from-environment")
    assert export_dotenv() == []  # no .env: nothing
    Path(".env").write_text("H2_TOPIC=orders-from-dotenv\nH2_KEPT=from-dotenv\nH2_EMPTY\n")
    assert export_dotenv() == ["H2_TOPIC"]
    assert os.environ["H2_TOPIC"] == "orders-from-dotenv"
    assert os.environ["H2_KEPT"] == "from-environment"
    assert "H2_EMPTY" not in os.environ


def test_env_example_lists_every_setting_and_loads(env: pytest.MonkeyPatch) -> None:
    example = (Path(__file__).resolve().parents[2] / ".env.example").read_text()
    named = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]*)=", example, flags=re.MULTILINE))
    fields = {
        name.removesuffix("_secret").upper()
        for name in Settings.model_fields
        if name != "kafka_config_vars"
    }
    assert fields - named == set(), "settings missing from .env.example"
    assert "KAFKA_CONFIG__SSL__CIPHER__SUITES" in named
    Path(".env").write_text(example)
    settings = load_settings()
    assert settings.database_url == "postgresql+asyncpg://user:pass@localhost:5432/db"
    assert settings.kafka_config() == {"bootstrap.servers": "localhost:9092"}
    assert settings.admin_token is None


# -- secrets -------------------------------------------------------------------------------


def test_secrets_are_absent_from_repr_str_and_dumps(env: pytest.MonkeyPatch) -> None:
    settings = Settings(
        database_url=f"postgresql+asyncpg://app:{PASSWORD}@db:5432/app",
        kafka_bootstrap_servers="k:9092",
        admin_token=TOKEN,
        kafka_extra_config=json.dumps({"sasl.username": "svc", "sasl.password": SASL}),
        kafka_config_vars={"ssl.key.password": SecretStr(SASL)},
    )
    shown = [repr(settings), str(settings), settings.model_dump_json(), f"{settings}"]
    for text in shown:
        for secret in (PASSWORD, TOKEN, SASL):
            assert secret not in text
    assert repr(settings).count("**********") == 4  # URL, token, extra config, one variable
    # ... while the code that needs them gets them in clear.
    assert PASSWORD in settings.database_url
    assert PASSWORD in settings.asyncpg_dsn
    assert settings.admin_token == TOKEN
    assert settings.kafka_config()["sasl.password"] == SASL
    assert settings.kafka_config()["ssl.key.password"] == SASL


def test_validation_errors_never_show_a_secret(env: pytest.MonkeyPatch) -> None:
    bad_url = f"mysql://app:{PASSWORD}@db/app"
    with pytest.raises(ValidationError) as raw:
        Settings(
            database_url=bad_url,
            kafka_bootstrap_servers="k:9092",
            admin_token="short-" + PASSWORD[:5],
        )
    assert PASSWORD not in str(raw.value)
    assert PASSWORD[:5] not in str(raw.value)
    assert len(raw.value.errors()) == 2
    env.setenv("DATABASE_URL", bad_url)
    env.setenv("KAFKA_BOOTSTRAP_SERVERS", "k:9092")
    env.setenv("KAFKA_EXTRA_CONFIG", f"sasl.password={SASL},tail-of-the-password")
    with pytest.raises(SettingsError) as info:
        load_settings()
    message = str(info.value)
    assert PASSWORD not in message
    assert SASL not in message
    assert "tail-of" not in message
    assert "DATABASE_URL is invalid" in message
    assert "KAFKA_EXTRA_CONFIG is invalid" in message
    assert "after 'sasl.password'" in message


def test_model_copy_takes_the_public_names(env: pytest.MonkeyPatch) -> None:
    settings = Settings(database_url="postgresql+asyncpg://u@h/d", kafka_bootstrap_servers="h:1")
    assert settings.admin_token is None
    copy = settings.model_copy(update={"admin_token": TOKEN})
    assert copy.admin_token == TOKEN
    assert TOKEN not in repr(copy)
    assert settings.model_copy(update={"admin_token": None}).admin_token is None


# -- *_FILE --------------------------------------------------------------------------------


def test_secrets_can_come_from_files(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    secret = tmp_path / "database_url"
    secret.write_text(f"postgresql+asyncpg://u:{PASSWORD}@db:5432/app\n")
    token = tmp_path / "admin_token"
    token.write_text(TOKEN)
    extra = tmp_path / "kafka_extra"
    extra.write_text(json.dumps({"sasl.password": SASL}))
    env.setenv("DATABASE_URL_FILE", str(secret))
    env.setenv("ADMIN_TOKEN_FILE", str(token))
    env.setenv("KAFKA_EXTRA_CONFIG_FILE", str(extra))
    env.setenv("KAFKA_BOOTSTRAP_SERVERS", "k:9092")
    settings = load_settings()
    assert settings.database_url == f"postgresql+asyncpg://u:{PASSWORD}@db:5432/app"
    assert settings.admin_token == TOKEN
    assert settings.kafka_config()["sasl.password"] == SASL
    assert PASSWORD not in repr(settings)
    assert TOKEN not in repr(settings)


def test_file_variants_in_dot_env_too(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "db").write_text("postgresql+asyncpg://u:p@from-file:5432/app")
    Path(".env").write_text(f"DATABASE_URL_FILE={tmp_path / 'db'}\nKAFKA_BOOTSTRAP_SERVERS=k:1\n")
    assert load_settings().database_url == "postgresql+asyncpg://u:p@from-file:5432/app"


def test_both_set_or_unreadable_file_is_a_clear_error(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    secret = tmp_path / "database_url"
    secret.write_text(f"postgresql+asyncpg://u:{PASSWORD}@db:5432/app")
    env.setenv("KAFKA_BOOTSTRAP_SERVERS", "k:9092")
    env.setenv("DATABASE_URL_FILE", str(secret))
    env.setenv("DATABASE_URL", "postgresql+asyncpg://other")
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert str(info.value) == (
        "invalid settings: both DATABASE_URL and DATABASE_URL_FILE are set; set one"
    )
    env.delenv("DATABASE_URL")
    missing = tmp_path / "missing"
    env.setenv("DATABASE_URL_FILE", str(missing))
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert str(info.value) == (
        f"invalid settings: DATABASE_URL_FILE: cannot read {missing}: No such file or directory"
    )
    env.setenv("DATABASE_URL_FILE", str(secret))
    env.setenv("ADMIN_TOKEN_FILE", str(tmp_path))  # a directory
    with pytest.raises(SettingsError, match=r"ADMIN_TOKEN_FILE: cannot read .*: Is a directory"):
        load_settings()


# -- Kafka extra config --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", {}),
        ("security.protocol=SASL_SSL", {"security.protocol": "SASL_SSL"}),
        (" a=1 , b = 2 ,", {"a": "1", "b": "2"}),
        ("sasl.jaas=x=y", {"sasl.jaas": "x=y"}),  # only the first = separates
        (
            '{"ssl.cipher.suites": "A,B", "x": "k=v,k2=v2"}',
            {"ssl.cipher.suites": "A,B", "x": "k=v,k2=v2"},
        ),
        (
            '{"enable.ssl.certificate.verification": false, "retries": 5}',
            {"enable.ssl.certificate.verification": "false", "retries": "5"},
        ),
    ],
)
def test_extra_config_forms(env: pytest.MonkeyPatch, value: str, expected: dict[str, str]) -> None:
    settings = Settings(
        database_url="postgresql+asyncpg://u@h/d",
        kafka_bootstrap_servers="h:1",
        kafka_extra_config=value,
    )
    assert settings.kafka_config() == {"bootstrap.servers": "h:1", **expected}


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("ssl.cipher.suites=A,B", "part 2 (after 'ssl.cipher.suites') is not key=value"),
        ("novalue", "part 1 (at position 1) is not key=value"),
        ("=x", "part 1 (at position 1) is not key=value"),
        ('{"a": 1', "is not valid JSON (line 1 column 8"),
        ('{"a": [1]}', "the value of 'a' must be a string, number or boolean"),
        ("bootstrap.servers=x:1", "must not set bootstrap.servers: use KAFKA_BOOTSTRAP_SERVERS"),
    ],
)
def test_bad_extra_config_is_named(env: pytest.MonkeyPatch, value: str, reason: str) -> None:
    env.setenv("DATABASE_URL", "postgresql+asyncpg://u@h/d")
    env.setenv("KAFKA_BOOTSTRAP_SERVERS", "h:1")
    env.setenv("KAFKA_EXTRA_CONFIG", value)
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert str(info.value).startswith("invalid settings: KAFKA_EXTRA_CONFIG is invalid: ")
    assert reason in str(info.value)


def test_per_key_variables_win_over_extra_config(env: pytest.MonkeyPatch) -> None:
    env.setenv("DATABASE_URL", "postgresql+asyncpg://u@h/d")
    env.setenv("KAFKA_BOOTSTRAP_SERVERS", "h:1")
    env.setenv("KAFKA_EXTRA_CONFIG", "ssl.cipher.suites=OLD,client.id=svc")
    env.setenv(
        "KAFKA_CONFIG__SSL__CIPHER__SUITES",
        "ECDHE-RSA-AES256-GCM-SHA384,ECDHE-RSA-AES128-GCM-SHA256",
    )
    env.setenv("KAFKA_CONFIG__SASL__PASSWORD", SASL)
    settings = load_settings()
    assert settings.kafka_config() == {
        "bootstrap.servers": "h:1",
        "client.id": "svc",
        "ssl.cipher.suites": "ECDHE-RSA-AES256-GCM-SHA384,ECDHE-RSA-AES128-GCM-SHA256",
        "sasl.password": SASL,
    }
    assert SASL not in repr(settings)
    env.setenv("KAFKA_CONFIG__BOOTSTRAP__SERVERS", "x:1")
    with pytest.raises(
        SettingsError, match=r"KAFKA_CONFIG__\* is invalid: .*KAFKA_BOOTSTRAP_SERVERS"
    ):
        load_settings()
