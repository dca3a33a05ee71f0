"""The box configuration file (`config/boxes.yaml`): schema, loading and validation.

Every error names the file and the key path, e.g.
`config/boxes.yaml: outbox.order_outbox_item.bucket_count: Input should be greater than 0`.
String values may reference the environment as `${NAME}` or `${NAME:-default}`.
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

BOX_NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}$")
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

RetryStrategyName = Literal["exponential_backoff", "latest_available"]


class ConfigError(RuntimeError):
    """The box configuration is missing or invalid (or, as KafkaSettingsError, a Kafka
    setting: transports/kafka_settings.py)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class BackoffConfig(_Strict):
    min_seconds: float = Field(default=1.0, gt=0)
    max_seconds: float = Field(default=600.0, gt=0)
    multiplier: float = Field(default=2.0, ge=1)
    jitter: float = Field(default=0.2, ge=0, lt=1)

    @model_validator(mode="after")
    def _min_below_max(self) -> BackoffConfig:
        if self.min_seconds > self.max_seconds:
            raise ValueError("min_seconds must not exceed max_seconds")
        return self


class RetentionConfig(_Strict):
    delivered: timedelta = Field(default=timedelta(days=1))
    failed: timedelta = Field(default=timedelta(days=7))
    batch_size: int = Field(default=1000, ge=1, le=100_000)
    interval_seconds: float = Field(default=60.0, gt=0)

    @field_validator("delivered", "failed")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be a positive duration (ISO 8601 like PT6H, P7D, or seconds)")
        return value


class TransportConfig(_Strict):
    class_path: str = Field(alias="class", description="module.path:ClassName")
    event_name: str | None = Field(
        default=None, description="only items with this event name; omitted means every event"
    )
    args: dict[str, Any] = Field(default_factory=dict)

    @field_validator("class_path")
    @classmethod
    def _import_path(cls, value: str) -> str:
        module, sep, attr = value.partition(":")
        if not sep or not module or not attr:
            raise ValueError(
                "must be an import path like 'my_service.transports.orders:OrderKafka'"
            )
        return value


class BoxConfig(_Strict):
    item_class: str
    bucket_count: int = Field(default=16, ge=1, le=4096)
    partition_strategy: Literal["number", "hash"] = "number"
    max_retries: int = Field(default=5, ge=0)
    retry_strategies: tuple[RetryStrategyName, ...] = ("exponential_backoff",)
    backoff: BackoffConfig = BackoffConfig()
    # Per-key order under failures (see docs/guarantees.md): an item in backoff or failed
    # for good holds back the later items of its key. On by default.
    strict_order: bool = True
    # What becomes of an item that fails for good in a strict box: `block` keeps it FAILED,
    # holding its key until an operator retries, discards or parks it; `park` moves it
    # aside at once (status PARKED, an audit row) and the key moves on.
    poisoned_head: Literal["block", "park"] = "block"
    retention: RetentionConfig = RetentionConfig()
    poll_interval: float = Field(default=1.0, gt=0, le=3600)
    batch_size: int = Field(default=500, ge=1, le=10_000)
    max_hops: int = Field(default=16, ge=1)
    transport_timeout_seconds: float = Field(default=30.0, gt=0)
    transports: tuple[TransportConfig, ...] = Field(min_length=1)
    # The admin API shows payloads only of boxes that allow it, after the optional redaction
    # hook "module:function" (called as function(event_name, payload) -> str | bytes).
    admin_show_payload: bool = False
    admin_redact: str | None = None

    @field_validator("item_class", "admin_redact")
    @classmethod
    def _item_import_path(cls, value: str | None) -> str | None:
        return None if value is None else TransportConfig._import_path(value)

    @model_validator(mode="after")
    def _compatible_strategies(self) -> BoxConfig:
        if len(set(self.retry_strategies)) != len(self.retry_strategies):
            raise ValueError("retry_strategies lists a strategy twice")
        if self.strict_order and "latest_available" in self.retry_strategies:
            raise ValueError(
                "latest_available needs `strict_order: false` (boxes are strict by default): "
                "in a strict box a newer item of a key is never delivered while an older one "
                "is pending, so there is nothing to compare against"
            )
        return self


class OutboxBoxConfig(BoxConfig):
    # Who sends the box's items: the service's own worker, or Debezium on Kafka Connect
    # reading the WAL (docs/debezium.md). Switch with `debezium-switch`, then set this.
    relay: Literal["worker", "debezium"] = "worker"


class InboxBoxConfig(BoxConfig):
    topics: tuple[str, ...] = Field(min_length=1)
    group_id: str | None = None
    default_event_name: str = "unknown"
    max_message_bytes: int = Field(default=1_048_576, ge=1)
    consume_batch_size: int = Field(default=500, ge=1, le=100_000)
    # How fast the group notices a dead consumer and hands its partitions to the others.
    session_timeout_ms: int = Field(default=10_000, ge=6_000, le=300_000)


class BoxesConfig(_Strict):
    outbox: dict[str, OutboxBoxConfig] = Field(default_factory=dict)
    inbox: dict[str, InboxBoxConfig] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _names(self) -> BoxesConfig:
        for name in [*self.outbox, *self.inbox]:
            if not BOX_NAME.match(name):
                raise ValueError(f"box name {name!r} must match {BOX_NAME.pattern}")
        both = set(self.outbox) & set(self.inbox)
        if both:
            raise ValueError(f"box names used for both outbox and inbox: {sorted(both)}")
        return self


def _expand_env(value: Any, path: str) -> Any:
    if isinstance(value, str):

        def replace(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in os.environ:
                return os.environ[name]
            if default is not None:
                return default
            raise ConfigError(f"{path}: environment variable {name} is not set and has no default")

        return ENV_REFERENCE.sub(replace, value)
    if isinstance(value, dict):
        return {k: _expand_env(v, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand_env(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


def parse_boxes(raw: Any, source: str = "boxes config") -> BoxesConfig:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping with 'outbox' and/or 'inbox'")
    try:
        expanded = _expand_env(raw, "")
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    try:
        return BoxesConfig.model_validate(expanded)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            key = ".".join(str(part) for part in error["loc"]) or "(top level)"
            lines.append(f"{source}: {key}: {error['msg']}")
        raise ConfigError("\n".join(lines)) from None


def load_boxes(path: Path) -> BoxesConfig:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read box configuration {path}: {exc.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    return parse_boxes(raw, str(path))
