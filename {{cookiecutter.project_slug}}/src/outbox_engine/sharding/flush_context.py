"""The current outbox context (see flush.py): which created items to flush at commit."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from uuid import UUID

# The relay's one outcome type: `status` is delivered | failed | pending | discarded.
from outbox_engine.relay.outcomes import Outcome

if TYPE_CHECKING:
    from outbox_engine.config.registry import Box

__all__ = ["OutboxContext", "Outcome", "current", "current_context"]


@dataclass
class OutboxContext:
    flush: bool
    created: list[tuple[Box, UUID]] = field(default_factory=list)
    outcomes: dict[UUID, Outcome] = field(default_factory=dict)

    @property
    def delivered(self) -> bool:
        """Every item created in the context was delivered."""
        return bool(self.outcomes) and all(o.status == "delivered" for o in self.outcomes.values())


current: ContextVar[OutboxContext | None] = ContextVar("outbox_context", default=None)


def current_context() -> OutboxContext | None:
    return current.get()
