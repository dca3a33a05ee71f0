"""Retry, discard, replay, park and purge in batches, in id order, resumable (the CLI's).

A run changes at most `batch_size` rows per transaction, lowest ids first, each batch
committed with its own operator audit row (who, the selection, how many rows, which ids),
so the audit log holds exactly the batches that committed, even when a run is interrupted
or the database goes away in the middle. `BatchRun.position` is the last id of the last
committed batch: `--after-id <position>` resumes a run where it stopped, without touching a
row twice. The rows are locked (FOR UPDATE) as a batch picks them, so a row a worker changed
in the meantime is re-checked against the selection and skipped if it no longer matches.

Why batches: one UPDATE of a million rows holds a million row locks for its whole duration,
blocks the workers on those rows and bloats one transaction; batches let live traffic go on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from outbox_engine.config.registry import Box
from outbox_engine.operations.actions import Action, effective_selection, selection_json
from outbox_engine.operations.errors import OpsError
from outbox_engine.operations.recapture import check_relay, recapture_batch
from outbox_engine.operations.selection import Selection
from outbox_engine.store.actions import change_batch, count_selected
from outbox_engine.store.audit import write_audit
from outbox_engine.store.purge_batches import (
    count_expired,
    delete_expired_batch,
    try_retention_lock,
)
from outbox_engine.store.wake import wake

MAX_BATCH = 100_000


@dataclass
class BatchRun:
    """A run's progress: what it counted before it started and what it has committed."""

    action: str
    box: str
    total: int
    after_id: int = 0  # where the run started (0: from the first row)
    changed: int = 0
    batches: int = 0
    position: int | None = None  # the last id of the last committed batch
    complete: bool = True  # False: stopped early (another worker was purging the box)
    delivered: int = 0  # purge only: the split of `changed`
    ended: int = 0

    @property
    def resume_from(self) -> int:
        """The `--after-id` that resumes this run."""
        return self.position if self.position is not None else self.after_id


OnBatch = Callable[[BatchRun, int, int, int], None]  # run, rows, first id, last id


def check_batching(batch_size: int, after_id: int, rate: float | None) -> None:
    if not 1 <= batch_size <= MAX_BATCH:
        raise OpsError(f"--batch-size must be 1-{MAX_BATCH}")
    if after_id < 0:
        raise OpsError("--after-id must be 0 or a positive id")
    if rate is not None and rate <= 0:
        raise OpsError("--rate must be a positive number of rows per second")


def _detail(run: BatchRun, picked: int, batch_size: int, first: int, last: int) -> str | None:
    """None for a run that is one batch from the first row (as a single UPDATE would be);
    otherwise which batch and ids this audit row covers."""
    if run.batches == 1 and run.after_id == 0 and picked < batch_size:
        return None
    return f"batch {run.batches}: ids {first}-{last}"


async def _pace(run: BatchRun, started: float, rate: float | None) -> None:
    if rate is not None:
        ahead = run.changed / rate - (time.monotonic() - started)
        if ahead > 0:
            await asyncio.sleep(ahead)


# -- retry, discard, replay, park --------------------------------------------------------


async def count_action(
    engine: AsyncEngine, box: Box, action: Action, selection: Selection, after_id: int = 0
) -> int:
    """How many rows the action would change now (the dry run, and the confirmation)."""
    check_relay(box, action.name)
    effective = effective_selection(action, selection)
    return await count_selected(engine, box.table_name, effective, after_id)


async def run_action(
    engine: AsyncEngine,
    box: Box,
    action: Action,
    selection: Selection,
    run: BatchRun,
    *,
    actor: str,
    batch_size: int = 1000,
    rate: float | None = None,
    on_batch: OnBatch | None = None,
) -> BatchRun:
    """Apply `action` to the selected rows with ids above `run.after_id`, batch by batch
    (on a box Debezium relays, replay captures them again: operations/recapture.py)."""
    check_relay(box, action.name)
    effective = effective_selection(action, selection)
    audit_selection: dict[str, Any] = selection_json(effective)
    if run.after_id:
        audit_selection["after_id"] = run.after_id
    started = time.monotonic()
    while True:
        after = run.resume_from
        async with engine.begin() as conn:
            if box.relayed_by_debezium:
                batch = await recapture_batch(
                    conn, box, effective, after_id=after, limit=batch_size
                )
            else:
                batch = await change_batch(
                    conn, box.table_name, action.name, effective, after_id=after, limit=batch_size
                )
            if batch.picked == 0 and run.batches > 0:
                return run  # the last batch took the last rows: nothing more to log
            run.batches += 1
            first, last = batch.first or after, batch.last or after
            await write_audit(
                conn,
                actor=actor,
                action=action.name,
                box=box.name,
                selection=audit_selection,
                affected=batch.changed,
                detail=_detail(run, batch.picked, batch_size, first, last)
                if batch.picked
                else None,
            )
            await wake(conn, box.channel)
        run.changed += batch.changed
        if batch.picked == 0:
            return run
        run.position = last
        if on_batch is not None:
            on_batch(run, batch.changed, first, last)
        await _pace(run, started, rate)


# -- purge ---------------------------------------------------------------------------------


def purge_selection(box: Box) -> dict[str, Any]:
    """The audit log's selection of a purge: the retention periods it applied."""
    config = box.config.retention
    return {
        "delivered_older_than_seconds": config.delivered.total_seconds(),
        "failed_discarded_parked_older_than_seconds": config.failed.total_seconds(),
    }


async def count_purge(engine: AsyncEngine, box: Box, after_id: int = 0) -> int:
    retention = box.config.retention
    return await count_expired(
        engine, box.table_name, retention.delivered, retention.failed, after_id
    )


async def run_purge(
    engine: AsyncEngine,
    box: Box,
    run: BatchRun,
    *,
    actor: str,
    batch_size: int,
    on_batch: OnBatch | None = None,
) -> BatchRun:
    """Delete the rows past their retention period with ids above `run.after_id`, batch by
    batch. Each batch takes the box's retention lock (as the workers' retention does); when
    a worker holds it, the run stops early (`run.complete` False) and can be resumed."""
    retention = box.config.retention
    selection = purge_selection(box)
    if run.after_id:
        selection["after_id"] = run.after_id
    while True:
        after = run.resume_from
        async with engine.begin() as conn:
            if not await try_retention_lock(conn, box.lock_namespace):
                run.complete = False
                return run
            batch = await delete_expired_batch(
                conn,
                box.table_name,
                retention.delivered,
                retention.failed,
                after_id=after,
                limit=batch_size,
            )
            if batch.picked == 0 and run.batches > 0:
                return run  # the last batch took the last rows: nothing more to log
            run.batches += 1
            delivered, ended = batch.delivered, batch.ended
            first, last = batch.first or after, batch.last or after
            detail = f"deleted {delivered} delivered and {ended} failed/discarded/parked items"
            ids = _detail(run, batch.picked, batch_size, first, last) if batch.picked else None
            await write_audit(
                conn,
                actor=actor,
                action="purge",
                box=box.name,
                selection=selection,
                affected=delivered + ended,
                detail=f"{detail}; {ids}" if ids else detail,
            )
        run.changed += delivered + ended
        run.delivered += delivered
        run.ended += ended
        if batch.picked == 0:
            return run
        run.position = last
        if on_batch is not None:
            on_batch(run, delivered + ended, first, last)
