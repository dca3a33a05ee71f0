"""Where settings come from besides plain variables: `NAME_FILE` secrets and per-key Kafka
variables, read from the real environment and the `.env` file alike (real environment wins).

- `NAME_FILE=/run/secrets/name` (Docker and Kubernetes secrets) sets NAME from the file's
  content, surrounding whitespace stripped, for the settings that may hold secrets. NAME and
  NAME_FILE both set is an error, as is a file that cannot be read: each names the variable
  and the path, never the content.
- `KAFKA_CONFIG__<KEY>=value` sets one librdkafka property: the part after the prefix is
  lowercased and each `__` becomes a dot (`KAFKA_CONFIG__SSL__CIPHER__SUITES=A,B` sets
  `ssl.cipher.suites` to `A,B`), so any value, commas included, passes unchanged.
- `KAFKA_EXTRA_CONFIG` parsing: a JSON object, or the older `key=value,key=value` form
  where that is unambiguous. Error texts name keys, never values (they may be passwords).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource
from pydantic_settings.sources import DotEnvSettingsSource, EnvSettingsSource

# Settings that may hold secrets, each with a NAME_FILE variant.
FILE_SETTINGS = ("DATABASE_URL", "ADMIN_TOKEN", "KAFKA_EXTRA_CONFIG")
KAFKA_CONFIG_PREFIX = "KAFKA_CONFIG__"
JSON_EXAMPLE = '{"ssl.cipher.suites": "A,B"}'


class SettingsSourceError(RuntimeError):
    """A `*_FILE` or `KAFKA_CONFIG__*` variable that cannot be used (the text names it)."""


def kafka_key(variable: str) -> str:
    """`KAFKA_CONFIG__SSL__CIPHER__SUITES` -> `ssl.cipher.suites`."""
    return variable[len(KAFKA_CONFIG_PREFIX) :].lower().replace("__", ".")


def parse_extra_config(text: str) -> dict[str, str]:
    """KAFKA_EXTRA_CONFIG as a dict: a JSON object (`{"ssl.cipher.suites": "A,B"}`), or
    `key=value,key=value`. In the second form a part without `=` is refused rather than
    guessed: it is a value that holds a comma, which only the JSON form can carry."""
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"is not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"
            ) from None
        if not isinstance(loaded, dict):
            raise ValueError(f"must be a JSON object such as {JSON_EXAMPLE}")
        config: dict[str, str] = {}
        for key, value in loaded.items():
            if isinstance(value, bool):
                config[key] = "true" if value else "false"
            elif isinstance(value, str | int | float):
                config[key] = str(value)
            else:
                raise ValueError(f"the value of {key!r} must be a string, number or boolean")
        return config
    config = {}
    previous = None
    for position, part in enumerate((p.strip() for p in text.split(",")), start=1):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            after = f"after {previous!r}" if previous else f"at position {position}"
            raise ValueError(
                f"part {position} ({after}) is not key=value: a value that holds a comma "
                f"needs the JSON form, e.g. {JSON_EXAMPLE}, or a KAFKA_CONFIG__<KEY> variable"
            )
        previous = key.strip()
        config[previous] = value.strip()
    return config


class FileAndKafkaVariables(PydanticBaseSettingsSource):
    """`NAME_FILE` and `KAFKA_CONFIG__*` variables, from the environment and `.env`."""

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        env: PydanticBaseSettingsSource,
        dotenv: PydanticBaseSettingsSource,
    ) -> None:
        super().__init__(settings_cls)
        # Lowercased names (the settings are case-insensitive); the environment wins.
        self.variables: dict[str, str] = {}
        for source in (dotenv, env):
            if isinstance(source, EnvSettingsSource | DotEnvSettingsSource):
                self.variables.update(
                    {k.lower(): v for k, v in source.env_vars.items() if v is not None}
                )

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # everything is done in __call__

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name in FILE_SETTINGS:
            path = self.variables.get(f"{name.lower()}_file")
            if not path:
                continue
            if name.lower() in self.variables:
                raise SettingsSourceError(f"both {name} and {name}_FILE are set; set one")
            try:
                values[name.lower()] = Path(path).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise SettingsSourceError(
                    f"{name}_FILE: cannot read {path}: {exc.strerror or exc}"
                ) from None
        prefix = KAFKA_CONFIG_PREFIX.lower()
        per_key = {
            kafka_key(name): value
            for name, value in sorted(self.variables.items())
            if name.startswith(prefix) and len(name) > len(prefix)
        }
        if per_key:
            values["kafka_config_vars"] = per_key
        return values
