"""Operator actions on a box relayed by Debezium (`relay: debezium`).

Such a box's items are captured by a trigger as they are inserted and marked DELIVERED at
once (store/capture.py): the worker never sends them, so setting an item PENDING would send
nothing. Hence:

- `replay` captures the selected delivered items again: copies them into the capture table
  in id order (`store/capture.recapture`), where Debezium reads them from the WAL and sends
  them with their original message id; the item rows stay DELIVERED.
- `retry`, `discard` and `park` are refused with the reason: a Debezium box's items never
  fail, back off or block their key. (Items left failed or pending from before the box was
  switched belong to the worker: switch the box back, act, and switch again.)

`check_relay` is called by every entry point (operations/actions.py for the admin API,
operations/batches.py for the CLI); `recapture_selected` and `recapture_batch` do the work
in the caller's transaction, which also writes the audit row.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection

from outbox_engine.config.registry import Box
from outbox_engine.operations.errors import OpsError
from outbox_engine.store.actions import ActionName, Batch
from outbox_engine.store.capture import recapture
from outbox_engine.store.capture_reads import pick_ids
from outbox_engine.store.selection import ItemFilter


def check_relay(box: Box, action: ActionName) -> None:
    """Refuse an action that means nothing for a box Debezium relays (OpsError)."""
    if not box.relayed_by_debezium or action == "replay":
        return
    raise OpsError(
        f"box {box.name} is relayed by Debezium (relay: debezium): its items are captured "
        f"when inserted and never fail, back off or block a key, so {action} applies to "
        "none of them; send delivered items again with `replay`. Items left failed or "
        "pending from before the switch are the worker's: switch the box back "
        "(debezium-switch --to worker), act on them, then switch again"
    )


def _topic(box: Box) -> str:
    from outbox_engine.debezium.connector import debezium_topic

    return debezium_topic(box)


async def recapture_selected(conn: AsyncConnection, box: Box, selection: ItemFilter) -> int:
    """Capture every selected item of `box` again, in id order; the number captured."""
    ids = await pick_ids(conn, box.table_name, selection, after_id=0, limit=None)
    return await recapture(conn, box.table_name, box.name, _topic(box), ids)


async def recapture_batch(
    conn: AsyncConnection, box: Box, selection: ItemFilter, *, after_id: int, limit: int
) -> Batch:
    """Capture the first `limit` selected items above `after_id` again, in id order."""
    ids = await pick_ids(conn, box.table_name, selection, after_id=after_id, limit=limit)
    captured = await recapture(conn, box.table_name, box.name, _topic(box), ids)
    return Batch(len(ids), captured, ids[0] if ids else None, ids[-1] if ids else None)
