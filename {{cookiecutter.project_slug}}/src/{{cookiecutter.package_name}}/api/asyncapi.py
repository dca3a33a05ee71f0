"""`GET /asyncapi.json`: the running service's AsyncAPI 3.0 document (outbox_engine/contracts/asyncapi.py).

Built from the boxes as this process loaded them (topics as configured by its environment)
on the first request, then served from memory: the boxes do not change while it runs.
Served only with `API_DOCS=true`, like `/openapi.json` (docs/security.md): it holds no data,
but maps the service's topics, consumer groups and event schemas. The same document, with the
configuration's defaults, is committed as contracts/asyncapi.json.
"""

from __future__ import annotations

import weakref
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from outbox_engine.config.registry import BoxRegistry
from outbox_engine.contracts.asyncapi import ServiceInfo, build_document

from .. import __version__
from ..container import Container
from . import deps

router = APIRouter(tags=["contracts"])
_DOCUMENTS: weakref.WeakKeyDictionary[BoxRegistry, dict[str, Any]] = weakref.WeakKeyDictionary()


@router.get("/asyncapi.json")
async def asyncapi(container: Annotated[Container, Depends(deps.container)]) -> JSONResponse:
    """The AsyncAPI 3.0 document of the events this service sends and receives."""
    registry = container.registry()
    document = _DOCUMENTS.get(registry)
    if document is None:
        document = _DOCUMENTS[registry] = build_document(
            registry, ServiceInfo(container.settings().service_name, __version__)
        )
    return JSONResponse(document)
