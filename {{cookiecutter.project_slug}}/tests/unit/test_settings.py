from __future__ import annotations

from pathlib import Path

import pytest

from {{ cookiecutter.package_name }}.settings import SettingsError, load_settings


def test_missing_settings_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert "DATABASE_URL is not set" in str(info.value)
    assert "KAFKA_BOOTSTRAP_SERVERS is not set" in str(info.value)


def test_malformed_settings_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "mysql://x")
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "no-port")
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert "DATABASE_URL is invalid" in str(info.value)
    assert "KAFKA_BOOTSTRAP_SERVERS is invalid" in str(info.value)


def test_valid_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql+asyncpg://u:p@db:5432/app")
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "k1:9092, k2:9092")
    monkeypatch.setenv("KAFKA_EXTRA_CONFIG", "security.protocol=SASL_SSL")
    settings = load_settings()
    assert settings.asyncpg_dsn == "postgresql://u:p@db:5432/app"
    assert settings.kafka_config() == {
        "bootstrap.servers": "k1:9092,k2:9092",
        "security.protocol": "SASL_SSL",
    }


def test_secrets_can_come_from_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    secret = tmp_path / "database_url"
    secret.write_text("postgresql+asyncpg://u:s3cret@db:5432/app\n")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("DATABASE_URL_FILE", str(secret))
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "k:9092")
    assert load_settings().database_url == "postgresql+asyncpg://u:s3cret@db:5432/app"
    monkeypatch.setenv("DATABASE_URL", "postgresql+asyncpg://other")
    with pytest.raises(SettingsError, match="both DATABASE_URL and DATABASE_URL_FILE are set"):
        load_settings()
    monkeypatch.delenv("DATABASE_URL")
    monkeypatch.setenv("DATABASE_URL_FILE", str(tmp_path / "missing"))
    with pytest.raises(SettingsError, match="DATABASE_URL_FILE: cannot read"):
        load_settings()
