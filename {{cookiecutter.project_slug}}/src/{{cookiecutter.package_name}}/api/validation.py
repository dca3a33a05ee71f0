"""422 replies that name the field and say what is wrong, and never echo the input.

FastAPI's default reply repeats every refused value (`input`) and its context: a 2 MB
string comes back as a 2 MB reply, a secret sent to the wrong field is reflected, and a value
that JSON cannot represent (NaN, an unpaired surrogate) turns the 422 into a 500 while the
reply is rendered. Here each error keeps its location (cut short), its message (cut short)
and its type; `input`, `ctx` and `url` are dropped. Malformed JSON says where it broke.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

MAX_ERRORS = 20
MAX_MESSAGE = 200
MAX_LOC_PART = 64


def _text(value: object, limit: int) -> str:
    text = str(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    # An unpaired surrogate in a location (a refused dict key) could not be encoded.
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def public_errors(errors: Sequence[Any]) -> list[dict[str, Any]]:
    """The errors as a reply may show them."""
    shown: list[dict[str, Any]] = []
    for error in list(errors)[:MAX_ERRORS]:
        message = str(error.get("msg", "invalid"))
        context = error.get("ctx") or {}
        if error.get("type") == "json_invalid" and isinstance(context.get("error"), str):
            message = f"{message}: {context['error']}"
        shown.append(
            {
                "loc": [
                    part if isinstance(part, int) else _text(part, MAX_LOC_PART)
                    for part in error.get("loc", ())
                ],
                "msg": _text(message, MAX_MESSAGE),
                "type": _text(error.get("type", "value_error"), MAX_LOC_PART),
            }
        )
    return shown


async def _refused(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return JSONResponse({"detail": public_errors(exc.errors())}, status_code=422)


def install(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _refused)
