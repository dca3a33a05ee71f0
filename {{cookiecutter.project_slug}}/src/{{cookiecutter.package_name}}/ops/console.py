"""What the operator sees while a destructive command runs: the confirmation and the progress.

`confirm` asks "change N items?" on a terminal, and refuses without one: a command run by a
script with no `--yes` must never hang waiting on a stdin nobody writes to, nor change rows
nobody confirmed. `Progress` draws a progress bar when stdout is a terminal, and otherwise
prints one plain line per batch (for logs; only when the run takes more than one batch, so
a small change still prints its single result line).
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any

import click

from outbox_engine.operations.batches import BatchRun


class ConfirmationRefused(Exception):
    """Not confirmed: declined at the prompt (exit 1) or no terminal to ask on (exit 2)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def confirm(question: str, *, yes: bool) -> None:
    """Return when confirmed (`--yes`, or "y" at the prompt); raise ConfirmationRefused."""
    if yes:
        return
    if sys.stdin is None or not sys.stdin.isatty():  # None: started with stdin closed
        raise ConfirmationRefused(
            f"{question} Not confirmed: no terminal to ask on; pass --yes (-y) to confirm, "
            "or --dry-run to only count",
            2,
        )
    if not click.confirm(question, default=False, err=True):
        raise ConfirmationRefused("not confirmed: nothing changed", 1)


class Progress:
    """Progress of one batched run; a context manager (closes the bar)."""

    def __init__(self, run: BatchRun, batch_size: int) -> None:
        self.run = run
        self.batch_size = batch_size
        self.tty = sys.stdout.isatty()
        self._bar: Any = None

    def __enter__(self) -> Progress:
        if self.tty and self.run.total > self.batch_size:
            self._bar = click.progressbar(
                length=self.run.total,
                label=f"{self.run.action} {self.run.box}",
                show_pos=True,
                show_eta=True,
            )
            self._bar.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.__exit__(exc_type, exc, tb)

    def batch(self, run: BatchRun, rows: int, first: int, last: int) -> None:
        if self._bar is not None:
            self._bar.update(rows)
        elif run.total > self.batch_size or run.after_id:
            print(
                f"{run.action} {run.box} batch {run.batches}: {rows} items (ids {first}-{last}), "
                f"{run.changed} of {run.total} done",
                flush=True,
            )


def stopped_line(run: BatchRun, why: str) -> str:
    """The resume hint printed when a run stops before its end."""
    return (
        f"{run.action} {run.box}: {why} after {run.changed} of {run.total} items in "
        f"{run.batches} batches; stopped after id {run.resume_from}; resume with "
        f"--after-id {run.resume_from}"
    )
