"""The FastAPI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from ..container import Container, shutdown
from . import admin, db_errors, health
{%- if cookiecutter.include_example_domain %}
from .orders import router as orders_router
{%- endif %}


def create_app(container: Container | None = None) -> FastAPI:
    container = container or Container()
    settings = container.settings()
    container.registry()  # fail at start on a bad boxes file, not at the first request

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        container.producer().start()
        try:
            yield
        finally:
            await shutdown(container)

    app = FastAPI(title=settings.service_name, lifespan=lifespan)
    app.state.container = container
    app.include_router(health.router)
    admin.install(app, settings)
    db_errors.install(app)
{%- if cookiecutter.include_example_domain %}
    app.include_router(orders_router)
{%- endif %}
{%- if cookiecutter.opentelemetry %}
    from ..telemetry import instrument_app

    instrument_app(app, settings)
{%- endif %}
    return app
