"""Integer parameters of paths and queries, read strictly.

FastAPI reads an `int` parameter in pydantic's lax mode, which takes "1.0", "1_000" and
" 1" as integers; an id is its ASCII digits and nothing else. Bounds (1 to the bigint
maximum) come from the `Path`/`Query` that the route puts next to it.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator

_DIGITS = re.compile(r"[0-9]{1,19}")


def _ascii_digits(value: Any) -> Any:
    if isinstance(value, str) and not _DIGITS.fullmatch(value):
        raise ValueError("must be an integer written in ASCII digits")
    return value


# Use as Annotated[StrictInt, Path(ge=1, le=...)].
StrictInt = Annotated[int, BeforeValidator(_ascii_digits)]
