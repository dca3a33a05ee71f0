"""Retry, discard, replay and purge: bulk status changes an operator asks for.

Each runs one parameterised UPDATE (or, dry, one COUNT) restricted to the statuses the
action applies to, then wakes the box's workers. A worker that holds one of the rows in
an unrecorded batch records its own outcome afterwards (the relay's record wins).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from ..messaging.config import ConfigError
from ..messaging.registry import Box, BoxRegistry
from ..messaging.retention import RetentionReport, purge
from ..messaging.status import ItemStatus
from .errors import NotFound, OpsError
from .selection import Selection

PENDING, FAILED, DELIVERED, DISCARDED = (
    ItemStatus.PENDING,
    ItemStatus.FAILED,
    ItemStatus.DELIVERED,
    ItemStatus.DISCARDED,
)


def get_box(registry: BoxRegistry, name: str) -> Box:
    try:
        return registry.get(name)
    except ConfigError as exc:
        raise NotFound(str(exc)) from None


@dataclass(frozen=True)
class Action:
    name: str
    # Statuses the action may change, and the default when neither ids nor statuses are given.
    eligible: tuple[ItemStatus, ...]
    default: tuple[ItemStatus, ...]
    assignments: str
    hint: str = ""


RETRY = Action(
    "retry",
    (FAILED, DISCARDED, PENDING),
    (FAILED,),
    "status = 0, errors_count = 0, next_attempt_at = NULL, processed_at = NULL",
    "delivered items are sent again with `replay`",
)
DISCARD = Action(
    "discard",
    (FAILED, PENDING),
    (FAILED,),
    "status = 3, processed_at = now(), next_attempt_at = NULL",
)
REPLAY = Action(
    "replay",
    (DELIVERED,),
    (DELIVERED,),
    "status = 0, errors_count = 0, next_attempt_at = NULL, processed_at = NULL, last_error = NULL",
    "failed or discarded items are sent again with `retry`",
)


@dataclass(frozen=True)
class ActionResult:
    action: str
    box: str
    rows: int
    dry_run: bool

    def describe(self) -> str:
        if self.dry_run:
            return f"dry run: {self.action} would change {self.rows} items of box {self.box}"
        return f"{self.action}: changed {self.rows} items of box {self.box}"


def _statuses(action: Action, selection: Selection) -> tuple[ItemStatus, ...]:
    if not selection.statuses:
        return action.eligible if selection.ids else action.default
    wrong = [s for s in selection.statuses if s not in action.eligible]
    if wrong:
        names = ", ".join(s.name.lower() for s in action.eligible)
        hint = f"; {action.hint}" if action.hint else ""
        raise OpsError(
            f"{action.name} applies to {names} items, not "
            f"{', '.join(s.name.lower() for s in wrong)}{hint}"
        )
    return selection.statuses


async def apply(
    engine: AsyncEngine, box: Box, action: Action, selection: Selection, dry_run: bool = False
) -> ActionResult:
    if action is REPLAY and not selection.narrowed:
        raise OpsError("replay needs a selection: ids, an id range, a time range or a key")
    where, params = selection.with_statuses(_statuses(action, selection)).where()
    table = box.table_name
    async with engine.begin() as conn:
        if dry_run:
            rows = await conn.execute(text(f"SELECT count(*) FROM {table} WHERE {where}"), params)
            return ActionResult(action.name, box.name, int(rows.scalar_one()), True)
        result = await conn.execute(
            text(f"UPDATE {table} SET {action.assignments} WHERE {where}"), params
        )
        await conn.execute(text("SELECT pg_notify(:channel, '')"), {"channel": box.channel})
    return ActionResult(action.name, box.name, int(getattr(result, "rowcount", 0) or 0), False)


async def purge_now(engine: AsyncEngine, boxes: Sequence[Box]) -> dict[str, RetentionReport]:
    """Run retention for the boxes now (as the workers do every `interval_seconds`)."""
    return {box.name: await purge(engine, box) for box in boxes}
