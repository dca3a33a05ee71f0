"""The admin API under /admin: list, inspect, retry, discard, replay, park, pause and
resume, stats, and the audit log.

Every route needs `Authorization: Bearer <ADMIN_TOKEN>` (compared in constant time).
Without ADMIN_TOKEN the admin API is disabled: its routes answer 503 and the app says so
in its log at start. Every change writes an audit row in its own transaction, naming
`admin:<ADMIN_TOKEN_NAME>` or, without a name, `admin:token-<fingerprint>` (8 hex digits of
the token's SHA-256: tells a rotated token from the old one, reveals nothing of it).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.config.registry import Box
from outbox_engine.operations.actions import DISCARD, PARK, REPLAY, RETRY, Action, apply, get_box
from outbox_engine.operations.browse import MAX_PAGE, get_item, list_items
from outbox_engine.operations.errors import NotFound, OpsError
from outbox_engine.operations.selection import MAX_ID, Selection, check_text
from outbox_engine.operations.stats import box_stats
from outbox_engine.store.audit import recent_audit
from outbox_engine.store.pauses import Pause, add_pause, list_pauses, remove_pause

from ..container import Container
from ..settings import Settings
from . import deps
from .params import StrictInt

log = logging.getLogger(__name__)

DISABLED = "admin API disabled: set ADMIN_TOKEN to enable it"


async def require_token(request: Request) -> None:
    token = deps.container_of(request).settings().admin_token
    if not token:
        raise HTTPException(503, DISABLED)
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.strip().encode(), token.encode()
    ):
        raise HTTPException(
            401, "missing or wrong admin token", headers={"WWW-Authenticate": "Bearer"}
        )


def admin_actor(settings: Settings) -> str:
    """Who the audit log names for a call made with the admin token."""
    if settings.admin_token_name:
        return f"admin:{settings.admin_token_name}"
    digest = hashlib.sha256((settings.admin_token or "").encode()).hexdigest()
    return f"admin:token-{digest[:8]}"


router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(require_token)])

ContainerDep = Annotated[Container, Depends(deps.container)]
ItemId = Annotated[StrictInt, Path(ge=1, le=MAX_ID)]


def _engine(container: Container) -> AsyncEngine:
    return container.engine()


def _box(container: Container, name: str) -> Box:
    return get_box(container.registry(), name)


class Ids(BaseModel):
    ids: list[Annotated[int, Field(ge=1, le=MAX_ID)]] = Field(min_length=1, max_length=10_000)
    dry_run: bool = False


class PauseTarget(BaseModel):
    bucket: int | None = Field(default=None, ge=0)
    key: str | None = Field(default=None, min_length=1, max_length=255)
    reason: str = Field(default="", max_length=1000)
    all: bool = False


@router.get("/boxes")
async def boxes(container: ContainerDep) -> list[dict[str, Any]]:
    """The configured boxes and what they are made of."""
    return [
        {
            "name": box.name,
            "kind": box.kind,
            "table": box.table_name,
            "bucket_count": box.config.bucket_count,
            "strict_order": box.config.strict_order,
            "relay": ("debezium" if box.relayed_by_debezium else "worker")
            if box.kind == "outbox"
            else None,
            "payload_shown": box.config.admin_show_payload,
            "events": sorted({b.event_name or "*" for b in box.transports}),
        }
        for box in container.registry()
    ]


@router.get("/stats")
async def stats(
    container: ContainerDep,
    box: Annotated[list[str] | None, Query()] = None,
    top: Annotated[int, Query(ge=0, le=100)] = 5,
) -> list[dict[str, Any]]:
    """Per box: counts by status, oldest pending age, deepest buckets and keys, top errors;
    its relay, and for a box Debezium relays its capture (trigger, slot, capture rows)."""
    from ..debezium_names import debezium_names

    names = debezium_names(container.settings())
    selected = [_box(container, name) for name in box] if box else list(container.registry())
    return [(await box_stats(_engine(container), b, top, names)).as_json() for b in selected]


@router.get("/boxes/{box}/items")
async def items(
    container: ContainerDep,
    box: str,
    status: Annotated[list[str] | None, Query()] = None,
    key: str | None = None,
    event: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    after_id: Annotated[StrictInt, Query(ge=0, le=MAX_ID)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
) -> dict[str, Any]:
    """A page of items in id order; pass `next_after_id` back as `after_id` for the next."""
    selection = Selection.build(
        statuses=status or (), event_key=key, event_name=event, since=since, until=until
    )
    page, next_after = await list_items(
        _engine(container), _box(container, box), selection, after_id=after_id, limit=limit
    )
    return {"items": page, "next_after_id": next_after}


@router.get("/boxes/{box}/items/{item_id}")
async def item(container: ContainerDep, box: str, item_id: ItemId) -> dict[str, Any]:
    """One item: headers, full last error, and its payload if the box allows it."""
    return await get_item(_engine(container), _box(container, box), item_id)


async def _act(container: Container, box: str, action: Action, body: Ids) -> dict[str, Any]:
    selection = Selection.build(ids=body.ids)
    result = await apply(
        _engine(container),
        _box(container, box),
        action,
        selection,
        body.dry_run,
        actor=admin_actor(container.settings()),
    )
    return {
        "action": result.action,
        "box": result.box,
        "rows": result.rows,
        "dry_run": body.dry_run,
    }


@router.post("/boxes/{box}/retry")
async def retry(container: ContainerDep, box: str, body: Ids) -> dict[str, Any]:
    """Failed, parked, discarded or waiting items back to pending, due now, attempts reset."""
    return await _act(container, box, RETRY, body)


@router.post("/boxes/{box}/discard")
async def discard(container: ContainerDep, box: str, body: Ids) -> dict[str, Any]:
    """Give up on failed, parked or pending items."""
    return await _act(container, box, DISCARD, body)


@router.post("/boxes/{box}/park")
async def park(container: ContainerDep, box: str, body: Ids) -> dict[str, Any]:
    """Move failed (or named pending) items aside: in a strict box their key moves on."""
    return await _act(container, box, PARK, body)


@router.post("/boxes/{box}/replay")
async def replay(container: ContainerDep, box: str, body: Ids) -> dict[str, Any]:
    """Delivered items back to pending: sent again with the same message id."""
    return await _act(container, box, REPLAY, body)


@router.get("/audit")
async def audit(
    container: ContainerDep,
    box: str | None = None,
    action: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
    before_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
) -> dict[str, Any]:
    """The audit log, newest first; pass `next_before_id` back as `before_id` for older rows."""
    if box is not None:
        _box(container, box)
    entries = await recent_audit(
        _engine(container),
        limit + 1,  # one more tells whether there is an older page
        box=box,
        action=check_text("action", action),
        before_id=before_id,
    )
    page = entries[:limit]
    return {
        "entries": [e.as_json() for e in page],
        "next_before_id": page[-1].id if len(entries) > limit else None,
    }


def _pause_json(pause: Pause) -> dict[str, Any]:
    return {
        "box": pause.box,
        "bucket": pause.bucket,
        "key": pause.event_key,
        "reason": pause.reason,
        "target": pause.target,
        "created_at": pause.created_at.isoformat() if pause.created_at else None,
    }


@router.get("/pauses")
async def pauses(container: ContainerDep, box: str | None = None) -> list[dict[str, Any]]:
    if box is not None:
        _box(container, box)
    return [_pause_json(p) for p in await list_pauses(_engine(container), box)]


def _target(container: Container, box: str, body: PauseTarget) -> dict[str, Any]:
    found = _box(container, box)
    if body.bucket is not None and body.key is not None:
        raise OpsError("pause a bucket or a key, not both")
    if body.bucket is not None and body.bucket >= found.config.bucket_count:
        raise OpsError(f"box {box} has buckets 0-{found.config.bucket_count - 1}")
    return {"bucket": body.bucket, "event_key": check_text("key", body.key)}


@router.post("/boxes/{box}/pause")
async def pause(container: ContainerDep, box: str, body: PauseTarget) -> dict[str, Any]:
    """Stop relaying the box, one bucket or one key; running workers notice within seconds."""
    target = _target(container, box, body)
    actor = admin_actor(container.settings())
    added = await add_pause(_engine(container), box, reason=body.reason, actor=actor, **target)
    return {"paused": Pause(box, **target).target, "created": added}


@router.post("/boxes/{box}/resume")
async def resume(container: ContainerDep, box: str, body: PauseTarget) -> dict[str, Any]:
    target = _target(container, box, body)
    actor = admin_actor(container.settings())
    removed = await remove_pause(_engine(container), box, every=body.all, actor=actor, **target)
    return {"resumed": removed}


def install(app: FastAPI, settings: Settings) -> None:
    """Mount the admin API and page, and say at start whether they are enabled."""
    from .admin_ui import router as ui_router

    async def ops_error(_request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 404 if isinstance(exc, NotFound) else 400)

    app.add_exception_handler(OpsError, ops_error)
    app.include_router(router)
    app.include_router(ui_router)
    if settings.admin_token:
        log.info("admin API enabled at /admin, page at /admin/ui")
    else:
        log.warning("admin API disabled: ADMIN_TOKEN is not set (/admin answers 503)")
