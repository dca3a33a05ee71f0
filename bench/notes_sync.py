"""Keep the report's profile section in step with bench/notes.md.

`python -m bench.notes_sync [--check] [--report docs/benchmarks.md]`

A run writes bench/notes.md into its report as the section "Where the time goes" (report.py),
as the notes stood when the run ended. Notes written after it (the rule's second run, a
profile taken later) belong in the published report too, without running the benchmarks
again: this command puts the current notes in that section and leaves every other byte of
the report as it was. With `--check` it writes nothing and says whether the two are in
step. Exit 0 in step (or brought in step), 1 out of step under `--check`, 2 when the report
has no such section (it was written with no notes), the notes hold a line the next sync
would take for a section heading, or a file cannot be read. Stdlib only,
like bench/compare.py, so the template's tests load it by path.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTES = ROOT / "bench" / "notes.md"
REPORT = ROOT / "docs" / "benchmarks.md"

# The section's heading as report.py writes it (its number follows the sections before it),
# and the heading of whatever section comes next.
HEADING = re.compile(
    r"^## \d+\. Where the time goes \(profiles; hand-written in bench/notes\.md\)\n\n",
    re.MULTILINE,
)
NEXT_HEADING = re.compile(r"^## \d+\. ", re.MULTILINE)


class SyncError(ValueError):
    """The report has no profile section to keep in step, or the notes cannot be one."""


def section_span(report: str) -> tuple[int, int]:
    """Where the section's body starts and ends in `report` (its heading excluded, the
    blank line before the next heading included in the body as report.py writes it)."""
    heading = HEADING.search(report)
    if heading is None:
        raise SyncError(
            "the report has no 'Where the time goes' section (a run with an empty "
            "bench/notes.md writes none); run the benchmarks again to get one"
        )
    after = NEXT_HEADING.search(report, heading.end())
    end = after.start() if after is not None else len(report)
    return heading.end(), end


def body(notes: str) -> str:
    """The section's body for `notes`, as report.py writes it: the notes stripped, then the
    blank line that separates it from the next heading."""
    return notes.strip() + "\n\n"


def synced(report: str, notes: str) -> str:
    """`report` with its profile section replaced by `notes`."""
    start, end = section_span(report)
    if NEXT_HEADING.search(notes):
        # The next sync would take that line for the section after this one.
        raise SyncError(
            "bench/notes.md has a line like a report section's heading ('## N. ...'); "
            "use ### or bold text inside the notes"
        )
    tail = report[end:]
    text = body(notes)
    if not tail:
        text = text.rstrip("\n") + "\n"
    return report[:start] + text + tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.notes_sync", description=__doc__)
    parser.add_argument("--report", type=Path, default=REPORT, help="default docs/benchmarks.md")
    parser.add_argument("--notes", type=Path, default=NOTES, help="default bench/notes.md")
    parser.add_argument("--check", action="store_true", help="say whether in step; write nothing")
    args = parser.parse_args(argv)
    try:
        report = args.report.read_text()
        notes = args.notes.read_text()
        wanted = synced(report, notes)
    except (OSError, SyncError) as exc:
        print(f"bench.notes_sync: {exc}", file=sys.stderr)
        return 2
    if wanted == report:
        print(f"{args.report}: its profile section is {args.notes}, as it stands")
        return 0
    if args.check:
        print(
            f"{args.report}: its profile section differs from {args.notes}; "
            "run python -m bench.notes_sync to copy the notes in",
            file=sys.stderr,
        )
        return 1
    args.report.write_text(wanted)
    print(f"{args.report}: profile section replaced by {args.notes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
