"""Message chains: correlation id, causation id and hop count.

While an inbox handler runs, the item it handles is the "current message"; outbox items
created then continue its chain (same correlation id, causation = its message id, hop + 1).
Outside a handler every created item starts a new chain.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from uuid import UUID


@dataclass(frozen=True, slots=True)
class ChainLink:
    correlation_id: str
    message_id: str
    hop: int


_current: ContextVar[ChainLink | None] = ContextVar("current_message", default=None)


def current_message() -> ChainLink | None:
    return _current.get()


@contextmanager
def handling(correlation_id: str, message_id: str, hop: int) -> Iterator[None]:
    token = _current.set(ChainLink(correlation_id, message_id, hop))
    try:
        yield
    finally:
        _current.reset(token)


def chain_headers(message_id: UUID) -> dict[str, str | int]:
    """The chain headers of a new item with this message id."""
    parent = _current.get()
    if parent is None:
        return {"correlation-id": str(message_id), "hop": 0}
    return {
        "correlation-id": parent.correlation_id,
        "causation-id": parent.message_id,
        "hop": parent.hop + 1,
    }
