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
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# A bearer token shorter than this is guessable; a random one of 32+ characters is the advice.
MIN_ADMIN_TOKEN_LENGTH = 16


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
    # Larger request bodies are refused with 413 before they are read into memory.
    api_max_body_bytes: int = Field(default=1024 * 1024, ge=1)
    # Serve the OpenAPI schema at /openapi.json (never the /docs and /redoc pages: FastAPI's
    # load their scripts from a third-party CDN). Off by default: it maps the whole API.
    api_docs: bool = False
    # Extra librdkafka settings as "key=value,key=value" (e.g. security.protocol=SASL_SSL).
    kafka_extra_config: str = ""
    admin_token: str | None = None
    # Who the audit log names for admin API actions ("admin:<name>"); without it, the
    # token's fingerprint ("admin:token-<8 hex of its SHA-256>"), never the token itself.
    admin_token_name: str | None = Field(
        default=None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.@:+-]+$"
    )
    # Probe (and, with telemetry, /metrics) address and ports of worker and consumer; port 0
    # turns them off. Loopback by default: in a container set 0.0.0.0 to be reached from outside.
    probe_host: str = Field(default="127.0.0.1", min_length=1)
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

    @field_validator("log_level")
    @classmethod
    def _check_log_level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in LOG_LEVELS:
            raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
        return level

    @field_validator("admin_token")
    @classmethod
    def _check_admin_token(cls, value: str | None) -> str | None:
        if not value:
            return None  # empty: the admin API stays disabled
        if len(value) < MIN_ADMIN_TOKEN_LENGTH:
            raise ValueError(f"must be at least {MIN_ADMIN_TOKEN_LENGTH} characters")
        if not all("!" <= c <= "~" for c in value):
            # It travels in an HTTP header: anything else could never match.
            raise ValueError("must be printable ASCII without spaces")
        return value

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
