"""The FastAPI application factory.

Besides the routes: request bodies pass the body guard (size limit, strict JSON), refused
input gets a 422 that does not echo it, and the OpenAPI schema and the AsyncAPI document
(`/asyncapi.json`) are served only with `API_DOCS=true`. The /docs and /redoc pages are never
served: FastAPI's load their scripts and styles from a third-party CDN, which the admin origin
must not run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from ..container import Container, shutdown
from . import admin, asyncapi, db_errors, health, validation
from .body_guard import BodyGuard
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

    app = FastAPI(
        title=settings.service_name,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json" if settings.api_docs else None,
    )
    app.state.container = container
    app.add_middleware(BodyGuard, max_body_bytes=settings.api_max_body_bytes)
    validation.install(app)
    app.include_router(health.router)
    if settings.api_docs:
        app.include_router(asyncapi.router)
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
