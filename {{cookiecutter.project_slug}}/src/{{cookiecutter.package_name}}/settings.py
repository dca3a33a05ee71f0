"""Service settings, read from the environment (12-factor) and an optional `.env` file.

Sources, strongest first: arguments to `Settings(...)`, the real environment, the `.env`
file in the working directory, the defaults. `NAME_FILE` variants of the secret settings
and per-key `KAFKA_CONFIG__*` variables are read from both (see settings_sources.py).

Secrets (the database URL, the admin token, the Kafka extra config and per-key variables)
are held as `SecretStr`: `repr`, `str`, logs and validation errors show `**********`; the
plain value is only unwrapped where it is used (`database_url`, `admin_token`,
`kafka_config()`). A missing or malformed variable fails at start with a message that names
it and never echoes its value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Self

from dotenv import dotenv_values
from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from outbox_engine.event_loop import EventLoopChoice
from outbox_engine.gc_tuning import DEFAULT_GC_THRESHOLD

from .settings_sources import (
    FileAndKafkaVariables,
    SettingsSourceError,
    parse_extra_config,
)

DEFAULT_BOXES_FILE = Path(__file__).resolve().parents[2] / "config" / "boxes.yaml"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# A bearer token shorter than this is guessable; a random one of 32+ characters is the advice.
MIN_ADMIN_TOKEN_LENGTH = 16
# Public attribute names of the secret fields: `Settings(database_url=...)`,
# `settings.model_copy(update={"admin_token": ...})` and `settings.database_url` keep working.
_SECRET_ALIASES = {"database_url": "database_url_secret", "admin_token": "admin_token_secret"}


class SettingsError(RuntimeError):
    """Raised when the environment does not hold valid settings."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="",
        case_sensitive=False,
        extra="ignore",
        env_file=".env",
        env_file_encoding="utf-8",
        populate_by_name=True,
        # Validation errors never echo a value: it may be a password.
        hide_input_in_errors=True,
    )

    database_url_secret: Annotated[
        SecretStr,
        Field(
            validation_alias=AliasChoices("database_url", "database_url_secret"),
            description="postgresql+asyncpg://user:pass@host:port/db",
        ),
    ]
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
    # Extra librdkafka settings: a JSON object ({"ssl.cipher.suites": "A,B"}) or
    # "key=value,key=value" (e.g. security.protocol=SASL_SSL). May hold a SASL password.
    kafka_extra_config: SecretStr = SecretStr("")
    # One librdkafka setting per KAFKA_CONFIG__<KEY> variable (see settings_sources.py).
    kafka_config_vars: dict[str, SecretStr] = Field(default_factory=dict)
    admin_token_secret: Annotated[
        SecretStr | None,
        Field(default=None, validation_alias=AliasChoices("admin_token", "admin_token_secret")),
    ]
    # NAME_FILE variants: read in settings_sources.py; declared so `.env` may hold them.
    database_url_file: Path | None = None
    admin_token_file: Path | None = None
    kafka_extra_config_file: Path | None = None
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
    # Appended to the Debezium relay's names (connector, replication slot, publication, topic
    # prefix; debezium_names.py): for a second deployment of this service on the same
    # PostgreSQL cluster or Kafka Connect (slots and connectors are named cluster-wide).
    debezium_name_suffix: str = Field(default="", max_length=20, pattern=r"^[a-z0-9_]*$")
    # The garbage collector's first threshold in the api, worker and consumer processes,
    # which also freeze what their startup left (outbox_engine/gc_tuning.py); 0 leaves
    # Python's collector as it is.
    gc_threshold: int = Field(default=DEFAULT_GC_THRESHOLD, ge=0)
    # The worker's and the consumer's event loop (outbox_engine/event_loop.py): auto is uvloop
    # where it is installed (it is, with uvicorn[standard], except on Windows), else asyncio's.
    event_loop: EventLoopChoice = "auto"
{%- if cookiecutter.opentelemetry %}
    otel_sdk_disabled: bool = False
    otel_service_name: str | None = None
    otel_exporter_otlp_endpoint: str | None = None
    otel_traces_exporter: str = "otlp"
{%- endif %}

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        files = FileAndKafkaVariables(settings_cls, env_settings, dotenv_settings)
        return init_settings, files, env_settings, dotenv_settings, file_secret_settings

    @field_validator("database_url_secret")
    @classmethod
    def _check_database_url(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value().startswith("postgresql+asyncpg://"):
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

    @field_validator("admin_token_secret")
    @classmethod
    def _check_admin_token(cls, secret: SecretStr | None) -> SecretStr | None:
        value = secret.get_secret_value() if secret is not None else ""
        if not value:
            return None  # empty: the admin API stays disabled
        if len(value) < MIN_ADMIN_TOKEN_LENGTH:
            raise ValueError(f"must be at least {MIN_ADMIN_TOKEN_LENGTH} characters")
        if not all("!" <= c <= "~" for c in value):
            # It travels in an HTTP header: anything else could never match.
            raise ValueError("must be printable ASCII without spaces")
        return secret

    @field_validator("kafka_extra_config")
    @classmethod
    def _check_extra_config(cls, value: SecretStr) -> SecretStr:
        config = parse_extra_config(value.get_secret_value())
        if "bootstrap.servers" in config:
            raise ValueError("must not set bootstrap.servers: use KAFKA_BOOTSTRAP_SERVERS")
        return value

    @field_validator("kafka_config_vars")
    @classmethod
    def _check_config_vars(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        if "bootstrap.servers" in value:
            raise ValueError("must not set bootstrap.servers: use KAFKA_BOOTSTRAP_SERVERS")
        return value

    @field_validator("log_format")
    @classmethod
    def _check_log_format(cls, value: str) -> str:
        if value not in ("json", "text"):
            raise ValueError("must be 'json' or 'text'")
        return value

    @property
    def database_url(self) -> str:
        """The database URL in clear, for the engine and migrations only: never log it."""
        return self.database_url_secret.get_secret_value()

    @property
    def admin_token(self) -> str | None:
        """The admin token in clear (None: admin API disabled), for comparing only."""
        return (
            None if self.admin_token_secret is None else self.admin_token_secret.get_secret_value()
        )

    @property
    def asyncpg_dsn(self) -> str:
        """The same database as a plain libpq/asyncpg DSN (for LISTEN and advisory locks)."""
        return self.database_url.replace("postgresql+asyncpg://", "postgresql://", 1)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """As pydantic's, also taking the public names of the secret fields in `update`
        (`{"admin_token": "..."}`), wrapped as `SecretStr`."""
        if update:
            update = {
                _SECRET_ALIASES.get(key, key): (
                    SecretStr(value) if key in _SECRET_ALIASES and isinstance(value, str) else value
                )
                for key, value in update.items()
            }
        return super().model_copy(update=update, deep=deep)

    def kafka_config(self) -> dict[str, str]:
        """librdkafka settings in clear: KAFKA_BOOTSTRAP_SERVERS, KAFKA_EXTRA_CONFIG, then
        the KAFKA_CONFIG__* variables (which win for a key both set)."""
        config = {"bootstrap.servers": self.kafka_bootstrap_servers}
        config.update(parse_extra_config(self.kafka_extra_config.get_secret_value()))
        config.update({k: v.get_secret_value() for k, v in self.kafka_config_vars.items()})
        return config


def export_dotenv() -> list[str]:
    """Copy the `.env` file's variables that the real environment lacks into `os.environ`.

    Settings read `.env` by themselves; this is for what reads `os.environ` directly:
    `${NAME}` in the boxes file, OpenTelemetry's `OTEL_*` variables, `MIGRATIONS_DIR`. The
    service calls it once at start (the container's `settings` provider). Returns the names
    it set; a missing file sets none."""
    env_file = Settings.model_config.get("env_file")
    if not isinstance(env_file, str | Path) or not Path(env_file).is_file():
        return []
    exported = []
    for name, value in dotenv_values(env_file, encoding="utf-8").items():
        if value is not None and name not in os.environ:
            os.environ[name] = value
            exported.append(name)
    return exported


def load_settings(**values: Any) -> Settings:
    """Read settings from the environment and `.env`, turning validation errors into one
    clear message that names each variable (and never shows a value)."""
    try:
        return Settings(**values)
    except SettingsSourceError as exc:
        raise SettingsError(f"invalid settings: {exc}") from None
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            variable = variable_name(error["loc"])
            if error["type"] == "missing":
                problems.append(f"{variable} is not set")
            else:
                problems.append(f"{variable} is invalid: {error['msg']}")
        raise SettingsError("invalid settings: " + "; ".join(problems)) from None


def variable_name(loc: tuple[int | str, ...]) -> str:
    """The environment variable of a validation error's location."""
    parts = [str(part) for part in loc]
    if parts and parts[0] == "kafka_config_vars":
        key = parts[1] if len(parts) > 1 else "*"
        return "KAFKA_CONFIG__" + key.replace(".", "__").upper()
    name = parts[0] if parts else ""
    return name.removesuffix("_secret").upper()
