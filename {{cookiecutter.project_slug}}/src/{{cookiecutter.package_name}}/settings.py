"""Service settings, read from the environment (12-factor).

A missing or malformed variable fails at start with a message that names it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_BOXES_FILE = Path(__file__).resolve().parents[2] / "config" / "boxes.yaml"


class SettingsError(RuntimeError):
    """Raised when the environment does not hold valid settings."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    database_url: Annotated[str, Field(description="postgresql+asyncpg://user:pass@host:port/db")]
    kafka_bootstrap_servers: Annotated[str, Field(description="host:port[,host:port...]")]
    boxes_file: Path = DEFAULT_BOXES_FILE
    service_name: str = "{{ cookiecutter.project_slug }}"
    log_level: str = "INFO"
    log_format: str = "json"
    db_pool_size: int = Field(default=10, ge=1)
    api_host: str = "0.0.0.0"
    api_port: int = Field(default=8000, ge=1, le=65535)
    # Extra librdkafka settings as "key=value,key=value" (e.g. security.protocol=SASL_SSL).
    kafka_extra_config: str = ""
    admin_token: str | None = None
    # Who the audit log names for admin API actions ("admin:<name>"); without it, the
    # token's fingerprint ("admin:token-<8 hex of its SHA-256>"), never the token itself.
    admin_token_name: str | None = Field(
        default=None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.@:+-]+$"
    )
    # Probe (and, with telemetry, /metrics) ports of worker and consumer; 0 turns them off.
    worker_probe_port: int = Field(default=8081, ge=0, le=65535)
    consumer_probe_port: int = Field(default=8082, ge=0, le=65535)
{%- if cookiecutter.opentelemetry %}
    otel_sdk_disabled: bool = False
    otel_service_name: str | None = None
    otel_exporter_otlp_endpoint: str | None = None
    otel_traces_exporter: str = "otlp"
{%- endif %}

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: str) -> str:
        if not value.startswith("postgresql+asyncpg://"):
            raise ValueError(
                "must start with postgresql+asyncpg:// (e.g. postgresql+asyncpg://user:pass@host:5432/db)"
            )
        return value

    @field_validator("kafka_bootstrap_servers")
    @classmethod
    def _check_bootstrap(cls, value: str) -> str:
        servers = [s.strip() for s in value.split(",") if s.strip()]
        if not servers or any(":" not in s for s in servers):
            raise ValueError("must be a comma-separated list of host:port")
        return ",".join(servers)

    @field_validator("log_format")
    @classmethod
    def _check_log_format(cls, value: str) -> str:
        if value not in ("json", "text"):
            raise ValueError("must be 'json' or 'text'")
        return value

    @property
    def asyncpg_dsn(self) -> str:
        """The same database as a plain libpq/asyncpg DSN (for LISTEN and advisory locks)."""
        return self.database_url.replace("postgresql+asyncpg://", "postgresql://", 1)

    def kafka_config(self) -> dict[str, str]:
        config = {"bootstrap.servers": self.kafka_bootstrap_servers}
        for pair in filter(None, (p.strip() for p in self.kafka_extra_config.split(","))):
            key, sep, value = pair.partition("=")
            if not sep:
                raise SettingsError(f"KAFKA_EXTRA_CONFIG: {pair!r} is not key=value")
            config[key.strip()] = value.strip()
        return config


# Settings that may hold secrets can come from files (Docker/Kubernetes secrets):
# NAME_FILE=/run/secrets/name sets NAME from the file's content.
SECRET_SETTINGS = ("DATABASE_URL", "KAFKA_EXTRA_CONFIG", "ADMIN_TOKEN")


def _secrets_from_files() -> dict[str, str]:
    values: dict[str, str] = {}
    for name in SECRET_SETTINGS:
        path = os.environ.get(f"{name}_FILE")
        if not path:
            continue
        if name in os.environ:
            raise SettingsError(f"both {name} and {name}_FILE are set; set one")
        try:
            values[name.lower()] = Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise SettingsError(f"{name}_FILE: cannot read {path}: {exc.strerror}") from None
    return values


def load_settings() -> Settings:
    """Read settings from the environment, turning validation errors into one clear message."""
    try:
        return Settings(**_secrets_from_files())  # type: ignore[arg-type]  # values parsed by pydantic
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            variable = "_".join(str(part) for part in error["loc"]).upper()
            if error["type"] == "missing":
                problems.append(f"{variable} is not set")
            else:
                problems.append(f"{variable} is invalid: {error['msg']}")
        raise SettingsError("invalid settings: " + "; ".join(problems)) from None
