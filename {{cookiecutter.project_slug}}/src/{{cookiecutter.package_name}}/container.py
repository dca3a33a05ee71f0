"""The dependency-injector container: one place that wires the service together.

Tests override providers (`container.settings.override(...)`), never module globals.
"""

from __future__ import annotations

import httpx
from dependency_injector import containers, providers

from outbox_engine.config.boxes import load_boxes
from outbox_engine.config.registry import BoxRegistry
from outbox_engine.creation.items import Outbox
from outbox_engine.middleware import Middlewares
from outbox_engine.observability.observer import Observer
from outbox_engine.sharding.flush import Flusher
from outbox_engine.sharding.replication import install_replication
from outbox_engine.transports.kafka import KafkaProducer
from outbox_engine.transports.resources import Resources

from .db import create_engine, create_session_factory
from .settings import Settings, export_dotenv, load_settings


def _settings() -> Settings:
    # `.env` into the environment first: the boxes file and OpenTelemetry read it directly.
    export_dotenv()
    return load_settings()


def _registry(settings: Settings) -> BoxRegistry:
    return BoxRegistry(load_boxes(settings.boxes_file))


def _observer(settings: Settings, middlewares: Middlewares) -> Observer:
{%- if cookiecutter.opentelemetry %}
    from .telemetry import install

    return install(middlewares, settings)
{%- else %}
    return Observer()
{%- endif %}


def _outbox(registry: BoxRegistry, middlewares: Middlewares, observer: Observer) -> Outbox:
    # Replicated models emit their items on every flush once the outbox exists.
    install_replication(registry)
    return Outbox(registry, middlewares.create, observer)


class Container(containers.DeclarativeContainer):
    settings = providers.Singleton(_settings)
    registry = providers.Singleton(_registry, settings)
    engine = providers.Singleton(lambda s: create_engine(s.database_url, s.db_pool_size), settings)
    session_factory = providers.Singleton(create_session_factory, engine)
    producer = providers.Singleton(lambda s: KafkaProducer(s.kafka_config()), settings)
    http = providers.Singleton(httpx.AsyncClient, timeout=10.0)
    middlewares = providers.Singleton(Middlewares)
    observer = providers.Singleton(_observer, settings, middlewares)
    outbox = providers.Singleton(_outbox, registry, middlewares, observer)
    resources = providers.Singleton(
        Resources,
        engine=engine,
        session_factory=session_factory,
        producer=producer,
        http=http,
        outbox=outbox,
        observer=observer,
    )
    flusher = providers.Singleton(Flusher, registry, resources, middlewares)


async def shutdown(container: Container) -> None:
    """Close what the container opened (in reverse order of need)."""
    await container.producer().close()
    await container.http().aclose()
    await container.engine().dispose()
