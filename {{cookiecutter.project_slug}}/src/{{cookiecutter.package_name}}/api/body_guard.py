"""Request bodies the API refuses before any route sees them: too large, or JSON that
Python's parser accepts but that no route can use.

* A body larger than `API_MAX_BODY_BYTES` is answered `413` as soon as its declared length
  (or, without one, the bytes read so far) exceeds the limit: a client cannot make the
  process buffer megabytes.
* A JSON body with a non-finite number (`NaN`, `Infinity`, `-Infinity`, or a literal such
  as `1e400` that only fits a float as infinity) is answered `422`. Python's `json` reads
  them as floats, and a 422 reply that echoed them could not even be rendered as JSON.
* A JSON body with a string holding NUL (`\\u0000`) or an unpaired surrogate (`\\ud800`) is
  answered `422` naming the field: PostgreSQL cannot store NUL in text or jsonb, and an
  unpaired surrogate cannot be encoded as UTF-8 at all.

Every route gets this, including the ones a project adds, because it sits in front of the
app as ASGI middleware. The body is read once here and handed on unchanged.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

DEFAULT_MAX_BODY_BYTES = 1024 * 1024


class _Refused(ValueError):
    """A JSON value that the parser accepts and the API does not."""


def _no_constant(name: str) -> Any:
    raise _Refused(f"non-finite number {name} is not allowed")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise _Refused("number out of range (it is infinite as a float)")
    return value


def _strings(document: Any) -> Iterator[tuple[list[str | int], str]]:
    """Every string of a parsed JSON document (keys included) with its location; iterative,
    so a deeply nested document cannot exhaust the stack."""
    stack: list[tuple[list[str | int], Any]] = [([], document)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            yield path, value
        elif isinstance(value, dict):
            for key, item in value.items():
                yield path, key
                stack.append(([*path, key], item))
        elif isinstance(value, list):
            stack.extend(([*path, index], item) for index, item in enumerate(value))


def _unstorable(text: str) -> bool:
    if "\x00" in text:
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def json_problem(body: bytes) -> tuple[list[str | int], str] | None:
    """Where and why a JSON body is refused, or None when it is acceptable here (malformed
    JSON is left to FastAPI, which answers it with its own 422)."""
    try:
        document = json.loads(body, parse_constant=_no_constant, parse_float=_finite_float)
    except _Refused as exc:
        return [], str(exc)
    except RecursionError:
        return [], "JSON nested too deeply"
    except ValueError:  # malformed JSON or not UTF-8: FastAPI says so
        return None
    for path, text in _strings(document):
        if _unstorable(text):
            where = [_shown(part) for part in path]
            return where, "text must not contain NUL (\\u0000) or unpaired surrogates"
    return None


def _shown(part: str | int) -> str | int:
    """A location part as a reply may show it: short and encodable."""
    if isinstance(part, int):
        return part
    return part[:64].encode("utf-8", "backslashreplace").decode("utf-8")


def _is_json(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            media: bytes = value.split(b";", 1)[0].strip().lower()
            return media == b"application/json" or media.endswith(b"+json")
    return False


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class BodyGuard:
    """ASGI middleware: the size limit and the JSON checks above."""

    def __init__(self, app: ASGIApp, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await self._too_large(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await self._too_large(scope, receive, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if body and _is_json(scope):
            problem = json_problem(body)
            if problem is not None:
                where, why = problem
                reply = JSONResponse(
                    {"detail": [{"loc": ["body", *where], "msg": why, "type": "json_invalid"}]},
                    status_code=422,
                )
                await reply(scope, receive, send)
                return
        await self.app(scope, _replay(body, receive), send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        reply = JSONResponse(
            {"detail": f"request body too large: at most {self.max_body_bytes} bytes"},
            status_code=413,
            headers={"Connection": "close"},  # the rest of the body is never read
        )
        await reply(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body again, as one message; after it, the client's own messages (disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
