"""The examples of docs/contracts.md run as written.

Every block fenced as python there is executed, in order, in one namespace (the blocks fenced
as py are illustrations: they declare classes a running service would not take twice); then
every `test_` function it defined is awaited with the `container` fixture, on empty tables."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import text

from {{ cookiecutter.package_name }}.container import Container

from ..support import ITEM_TABLES, PROJECT_ROOT

DOC = PROJECT_ROOT / "docs" / "contracts.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def examples() -> dict[str, Callable[[Container], Awaitable[None]]]:
    namespace: dict[str, Any] = {"__name__": "docs_contracts"}
    for block in BLOCK.findall(DOC.read_text(encoding="utf-8")):
        exec(compile(block, str(DOC), "exec"), namespace)
    return {name: value for name, value in namespace.items() if name.startswith("test_")}


async def test_the_examples_of_docs_contracts_run(container: Container) -> None:
    found = examples()
    assert len(found) >= 3, sorted(found)
    for name, example in found.items():
        try:
            await example(container)
        except Exception as exc:
            raise AssertionError(f"docs/contracts.md: {name} failed: {exc!r}") from exc
        finally:
            async with container.engine().begin() as conn:
                await conn.execute(
                    text(f"TRUNCATE {', '.join(ITEM_TABLES)} RESTART IDENTITY CASCADE")
                )
