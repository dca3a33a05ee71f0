"""The admin page at /admin/ui: static HTML, CSS and JS shipped in the package (no CDN).

The page holds no data itself: it asks for the admin token, keeps it in sessionStorage and
calls the JSON API under /admin with it.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response

from . import deps

STATIC = Path(__file__).with_name("admin_static")
FILES = {
    "": ("index.html", "text/html; charset=utf-8"),
    "app.js": ("app.js", "text/javascript; charset=utf-8"),
    "app.css": ("app.css", "text/css; charset=utf-8"),
}
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

router = APIRouter(prefix="/admin/ui", tags=["admin"], include_in_schema=False)


@router.get("")
@router.get("/{name}")
async def page(request: Request, name: str = "") -> Response:
    if not deps.container_of(request).settings().admin_token:
        raise HTTPException(503, "admin API disabled: set ADMIN_TOKEN to enable it")
    if name not in FILES:
        raise HTTPException(404, "not found")
    filename, media_type = FILES[name]
    return Response((STATIC / filename).read_bytes(), media_type=media_type, headers=HEADERS)
