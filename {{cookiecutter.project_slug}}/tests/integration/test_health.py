from __future__ import annotations

import httpx

from {{ cookiecutter.package_name }}.api.app import create_app
from {{ cookiecutter.package_name }}.container import Container, shutdown
from {{ cookiecutter.package_name }}.settings import Settings


async def get(container: Container, path: str) -> httpx.Response:
    app = create_app(container)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        return await client.get(path)


async def test_liveness_and_readiness(container: Container) -> None:
    assert (await get(container, "/healthz")).json() == {"status": "ok"}
    ready = await get(container, "/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "checks": {"database": "ok", "kafka": "ok"}}


async def test_not_ready_when_kafka_is_unreachable(settings: Settings) -> None:
    broken = Container()
    broken.settings.override(settings.model_copy(update={"kafka_bootstrap_servers": "127.0.0.1:1"}))
    broken.producer().start()
    try:
        response = await get(broken, "/readyz")
    finally:
        await shutdown(broken)
    assert response.status_code == 503
    body = response.json()
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["kafka"].startswith("error: ")
