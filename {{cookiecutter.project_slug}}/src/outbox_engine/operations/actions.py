"""Retry, discard, replay and park: bulk status changes an operator asks for.

`apply` (the admin API's) runs one parameterised UPDATE (or, dry, one COUNT) restricted to
the statuses the action applies to, writes one audit row (who, which selection, how many
rows) in the same transaction, then wakes the box's workers. A dry run changes nothing and
writes no row. The CLI runs the same actions in batches (`batches.py`). The relay records
an outcome only on an item still in the state it claimed, so a worker that held one of the
rows in an unrecorded batch drops its record after your change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.config.boxes import ConfigError
from outbox_engine.config.registry import Box, BoxRegistry
from outbox_engine.operations.errors import NotFound, OpsError
from outbox_engine.operations.recapture import check_relay, recapture_selected
from outbox_engine.operations.selection import Selection
from outbox_engine.store.actions import ActionName, change_selected, count_selected
from outbox_engine.store.audit import write_audit
from outbox_engine.store.status import ItemStatus
from outbox_engine.store.wake import wake

PENDING, FAILED, DELIVERED, DISCARDED, PARKED = (
    ItemStatus.PENDING,
    ItemStatus.FAILED,
    ItemStatus.DELIVERED,
    ItemStatus.DISCARDED,
    ItemStatus.PARKED,
)


def get_box(registry: BoxRegistry, name: str) -> Box:
    """The box named `name`; NotFound (HTTP 404, exit 2) when there is none."""
    try:
        return registry.get(name)
    except ConfigError as exc:
        raise NotFound(str(exc)) from None


@dataclass(frozen=True)
class Action:
    """An operator action: its name (which also names its assignments in
    store/actions.py), the statuses it may change, and the default when neither ids nor
    statuses are given."""

    name: ActionName
    eligible: tuple[ItemStatus, ...]
    default: tuple[ItemStatus, ...]
    hint: str = ""


# Parked items are retried only when asked for by id or `--status parked`: they were set
# aside on purpose, and in a strict box a retried one is delivered after the later items
# of its key (which went on while it was parked).
RETRY = Action(
    "retry",
    (FAILED, DISCARDED, PENDING, PARKED),
    (FAILED,),
    "delivered items are sent again with `replay`",
)
DISCARD = Action("discard", (FAILED, PENDING, PARKED), (FAILED,))
# Move a poisoned head aside: it no longer blocks its key in a strict box (the later items
# go on), and it stays for inspection and a later retry or discard. A pending item (one in
# backoff also holds its key) is parked only when named, as with discard.
PARK = Action("park", (FAILED, PENDING), (FAILED,), "parked items go back with `retry`")
REPLAY = Action(
    "replay",
    (DELIVERED,),
    (DELIVERED,),
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


def effective_selection(action: Action, selection: Selection) -> Selection:
    """The selection with the statuses the action applies to (refusing others)."""
    if action is REPLAY and not selection.narrowed:
        raise OpsError("replay needs a selection: ids, an id range, a time range or a key")
    return selection.with_statuses(_statuses(action, selection))


def selection_json(selection: Selection) -> dict[str, Any]:
    """The selection as the audit log stores it: only what narrows it, statuses by name."""
    fields = {
        "ids": list(selection.ids),
        "statuses": [s.name.lower() for s in selection.statuses],
        "key": selection.event_key,
        "event": selection.event_name,
        "since": selection.since.isoformat() if selection.since else None,
        "until": selection.until.isoformat() if selection.until else None,
        "first_id": selection.first_id,
        "last_id": selection.last_id,
    }
    return {name: value for name, value in fields.items() if value not in (None, [])}


async def apply(
    engine: AsyncEngine,
    box: Box,
    action: Action,
    selection: Selection,
    dry_run: bool = False,
    *,
    actor: str,
) -> ActionResult:
    """Run `action` on the selected items of `box` as `actor` (who the audit row names).
    On a box Debezium relays, replay captures the items again and the other actions are
    refused (operations/recapture.py)."""
    check_relay(box, action.name)
    effective = effective_selection(action, selection)
    if dry_run:
        rows = await count_selected(engine, box.table_name, effective)
        return ActionResult(action.name, box.name, rows, True)
    async with engine.begin() as conn:
        if box.relayed_by_debezium:
            changed = await recapture_selected(conn, box, effective)
        else:
            changed = await change_selected(conn, box.table_name, action.name, effective)
        await write_audit(
            conn,
            actor=actor,
            action=action.name,
            box=box.name,
            selection=selection_json(effective),
            affected=changed,
        )
        await wake(conn, box.channel)
    return ActionResult(action.name, box.name, changed, False)
