"""The record step: a batch's outcomes written in one short transaction, and observed.

Each slot's `Outcome` says what its item becomes: delivered, a failed attempt (pending again
after a delay, or failed / parked for good), discarded; unavailable and deferred items stay
as they are. `store/record.py` applies the changes fenced (each names the state the claim
saw); what it drops is counted. The same outcomes feed the batch report and the observer
(`Observer.outcomes`, labelled by the decision's value), so every reader sees one decision.
"""

from __future__ import annotations

import logging

from outbox_engine.config.registry import Box
from outbox_engine.observability.observer import Observer
from outbox_engine.relay.batch import BatchReport, Slot
from outbox_engine.relay.outcomes import Decision
from outbox_engine.store.pgconn import DriverConnections
from outbox_engine.store.record import FailedAttempt, Recorder

log = logging.getLogger(__name__)


class OutcomeRecorder:
    def __init__(self, box: Box, connections: DriverConnections, observer: Observer) -> None:
        self.box = box
        self.connections = connections
        self.observer = observer
        # The base Observer (telemetry off) does nothing with outcomes: no list is built
        # for it, a tuple per item of every batch.
        self._observes_outcomes = observer.observes("outcomes")
        self.recorder = Recorder(box.table_name, box.name)
        # Outcomes dropped by the fence since start (see store/record.py).
        self.fenced_total = 0

    async def record(self, slots: list[Slot], report: BatchReport) -> None:
        delivered: list[int] = []
        failed: list[FailedAttempt] = []
        discards: list[tuple[int, str]] = []
        for slot in slots:
            outcome = slot.outcome
            decision = outcome.decision
            if decision is Decision.DELIVERED:
                report.delivered += 1
                if not slot.recorded:
                    delivered.append(slot.item.id)
            elif decision is Decision.RETRY or decision is Decision.DEAD:
                item = slot.item
                report.failed_attempts += 1
                failed.append(
                    FailedAttempt(
                        item.id,
                        item.errors_count,
                        outcome.errors_count,
                        outcome.item_status(),
                        outcome.error or "",
                        outcome.delay_seconds,
                    )
                )
                if decision is Decision.DEAD:
                    report.dead += 1
                    log.warning(
                        "box %s: item %s (%s) failed for good after %d attempts%s: %s",
                        self.box.name,
                        item.id,
                        item.uuid,
                        outcome.errors_count,
                        " (parked: its key moves on)" if outcome.parked else "",
                        outcome.error,
                    )
            elif decision is Decision.DISCARDED:
                discards.append((slot.item.id, outcome.error or ""))
            elif decision is Decision.UNAVAILABLE:
                report.unavailable += 1
                if report.unavailable_error is None:
                    report.unavailable_error = outcome.error
            else:
                report.deferred += 1
        report.discarded = len(discards)
        if not (delivered or failed or discards):
            return
        async with self.connections.acquire() as conn:
            recorded = await self.recorder.record(conn, delivered, failed, discards)
        self.fenced(recorded.fenced, "recorded")

    def observe(self, slots: list[Slot], seconds: float) -> None:
        if not self._observes_outcomes:
            return
        self.observer.outcomes(
            self.box, [(slot.item, slot.outcome.decision.value) for slot in slots], seconds
        )

    def fenced(self, count: int, what: str) -> None:
        """Changes dropped because the item was no longer in the state this worker claimed
        it in: another worker took over its bucket and handled it."""
        if not count:
            return
        self.fenced_total += count
        self.observer.fenced(self.box, count)
        log.warning(
            "box %s: %d outcomes not %s: their items changed state since this worker claimed "
            "them (another worker owns the bucket now)",
            self.box.name,
            count,
            what,
        )
