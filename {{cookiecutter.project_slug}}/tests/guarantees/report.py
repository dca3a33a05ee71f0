"""The numbers of a scenario run, their sum over soak rounds, and the table printed at the end
of the session (and written to a file)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path


@dataclass
class Row:
    scenario: str
    runs: int = 1
    created: int = 0  # outbox items committed (rows in the outbox table)
    delivered: int = 0  # distinct message ids of those items read back from the topic
    lost: int = 0  # committed but never on the topic
    phantom: int = 0  # on the topic but never committed (atomicity)
    out_of_order: int = 0  # per-key first deliveries out of creation order
    duplicated: int = 0  # messages on the topic beyond the distinct ids (allowed)
    inbox_expected: int = 0  # distinct message ids produced to the inbox topic
    inbox_stored: int = 0  # inbox rows
    inbox_effects: int = 0  # handler effects (one per handled message)
    inbox_mismatched: int = 0  # ids stored/applied but never produced, or the reverse
    retried: int = 0  # outbox items delivered after at least one failed attempt
    scripted: int = 0  # items whose first attempt the scripted transport made slow or fail
    restarts: int = 0  # service processes that exited on their own and were started again
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    facts: dict[str, int] = field(default_factory=dict)  # a scenario's own counts
    passed: bool = False

    def add(self, other: Row) -> None:
        for f in fields(self):
            if f.name in ("scenario", "notes", "passed", "facts"):
                continue
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        self.notes.extend(note for note in other.notes if note not in self.notes)
        for key, value in other.facts.items():
            self.facts[key] = self.facts.get(key, 0) + value
        self.passed = self.passed and other.passed


COLUMNS = (
    ("scenario", "scenario"),
    ("runs", "runs"),
    ("created", "created"),
    ("delivered", "delivered"),
    ("lost", "lost"),
    ("phantom", "phantom"),
    ("out_of_order", "out of order"),
    ("duplicated", "duplicated"),
    ("inbox", "inbox effects expected/stored/actual"),
    ("retried", "retried"),
    ("restarts", "restarts"),
    ("seconds", "seconds"),
    ("result", "result"),
)


def _cell(row: Row, key: str) -> str:
    if key == "inbox":
        return f"{row.inbox_expected}/{row.inbox_stored}/{row.inbox_effects}"
    if key == "seconds":
        return f"{row.seconds:.0f}"
    if key == "result":
        return "pass" if row.passed else "FAIL"
    return str(getattr(row, key))


def aggregate(rows: list[Row]) -> list[Row]:
    """One row per scenario, in first-run order, summed over its runs."""
    merged: dict[str, Row] = {}
    for row in rows:
        if row.scenario in merged:
            merged[row.scenario].add(row)
        else:
            merged[row.scenario] = Row(**{f.name: getattr(row, f.name) for f in fields(row)})
            merged[row.scenario].notes = list(row.notes)
            merged[row.scenario].facts = dict(row.facts)
    return list(merged.values())


def table(rows: list[Row]) -> str:
    """A Markdown table (readable in a terminal, pasteable into docs)."""
    header = [title for _, title in COLUMNS]
    body = [[_cell(row, key) for key, _ in COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(cells) for cells in body]
    notes = [f"- {row.scenario}: {note}" for row in rows for note in row.notes]
    if notes:
        out += ["", *notes]
    return "\n".join(out)


def write(path: Path, rows: list[Row]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(table(rows) + "\n")
