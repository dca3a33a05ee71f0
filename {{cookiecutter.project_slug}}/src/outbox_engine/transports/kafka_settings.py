"""A librdkafka client made from the Kafka settings: a refused setting said as a setting error.

librdkafka checks every property when a client is made and refuses an unknown name or a
value of the wrong kind with `_INVALID_ARG`. Uncaught, that was a traceback and exit code 1
from `worker` or `consumer`; as `KafkaSettingsError` (a `ConfigError`) the console script
prints one line naming the property and where such settings come from, and exits with 2,
like any other invalid configuration. Values are secrets (docs/configuration.md): where
librdkafka quotes the value it refused, the line shows `"***"` instead. The producer's clients (transports/kafka_client.py)
and the inbox consumer's are made inside `settings_checked()`, the first clients either
process makes:

    with settings_checked(config):
        producer = Producer(client_config(config))
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from outbox_engine.config.boxes import ConfigError


class KafkaSettingsError(ConfigError):
    """librdkafka refused a Kafka setting (its name or its value)."""


@contextmanager
def settings_checked(config: Mapping[str, Any]) -> Iterator[None]:
    """Turn librdkafka's refusal of a setting of `config` (`_INVALID_ARG`) into
    KafkaSettingsError; any other error passes as it is."""
    try:
        yield
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError) and error.code() == KafkaError._INVALID_ARG:
            raise KafkaSettingsError(
                f"Kafka settings: {_without_values(error.str(), config)} (set by "
                "KAFKA_EXTRA_CONFIG or a KAFKA_CONFIG__* variable, or a default of the engine's)"
            ) from None
        raise


def _without_values(text: str, config: Mapping[str, Any]) -> str:
    """`text` with every quoted value of `config` replaced by "***"."""
    for value in config.values():
        if isinstance(value, str | int | float) and str(value):
            text = text.replace(f'"{value}"', '"***"')
    return text
