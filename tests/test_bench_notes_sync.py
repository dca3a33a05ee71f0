"""`python -m bench.notes_sync` keeps the report's "Where the time goes" section equal to
bench/notes.md: the repository's own report is in step now; a sync replaces that section's
body and no other byte (the section in the middle and last, notes with and without trailing
blank lines); `--check` says so by its exit code and writes nothing; a report without the
section, or notes holding a line the next sync would take for a heading, fail with a message.
That the section's format is report.py's is checked on a real report by test_bench_quick.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT, load_bench_module

HEADING = "## 12. Where the time goes (profiles; hand-written in bench/notes.md)"
BEFORE = "# Benchmarks\n\n## 11. Targets\n\n| target | met |\n| --- | --- |\n| x | yes |\n\n"
AFTER = "## 13. Configurations\n\n- ours: two lanes\n"


sync = load_bench_module("notes_sync")


def _report(notes: str, after: str = AFTER) -> str:
    return f"{BEFORE}{HEADING}\n\n{notes.strip()}\n\n{after}"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench.notes_sync", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_published_report_is_in_step_with_the_notes() -> None:
    result = _cli("--check")
    assert result.returncode == 0, result.stderr
    report = (REPO_ROOT / "docs" / "benchmarks.md").read_text()
    start, end = sync.section_span(report)
    assert report[start:end] == (REPO_ROOT / "bench" / "notes.md").read_text().strip() + "\n\n"


@pytest.mark.parametrize("new", ["new line 1\n\nnew 2\n", "\n\nnew only\n\n\n", "x"])
def test_a_sync_replaces_the_section_and_nothing_else(new: str) -> None:
    report = _report("old profile\n\nold paragraph 2")
    out = sync.synced(report, new)
    assert out == _report(new)
    assert out.startswith(BEFORE + HEADING + "\n\n")
    assert out.endswith("\n\n" + AFTER)
    assert sync.synced(out, new) == out  # a second sync changes nothing


def test_a_section_at_the_end_of_the_report() -> None:
    report = f"{BEFORE}{HEADING}\n\nold\n"
    assert sync.synced(report, "new\n\n") == f"{BEFORE}{HEADING}\n\nnew\n"


def test_check_says_out_of_step_and_writes_nothing(tmp_path: Path) -> None:
    report, notes = tmp_path / "benchmarks.md", tmp_path / "notes.md"
    report.write_text(_report("old"))
    notes.write_text("new\n")
    args = ("--report", str(report), "--notes", str(notes))
    checked = _cli(*args, "--check")
    assert checked.returncode == 1
    assert "differs from" in checked.stderr
    assert report.read_text() == _report("old")
    written = _cli(*args)
    assert written.returncode == 0, written.stderr
    assert report.read_text() == _report("new")
    assert _cli(*args, "--check").returncode == 0


def test_a_report_without_the_section_is_refused(tmp_path: Path) -> None:
    report, notes = tmp_path / "benchmarks.md", tmp_path / "notes.md"
    report.write_text(BEFORE + AFTER)
    notes.write_text("new\n")
    result = _cli("--report", str(report), "--notes", str(notes))
    assert result.returncode == 2
    assert "no 'Where the time goes' section" in result.stderr
    assert report.read_text() == BEFORE + AFTER


def test_notes_with_a_line_like_a_section_heading_are_refused(tmp_path: Path) -> None:
    report = _report("old")
    with pytest.raises(sync.SyncError, match="heading"):
        sync.synced(report, "intro\n\n## 3. Not a section of the notes\n")
    # A heading of a lower level inside the notes is fine.
    assert "### A sub-heading" in sync.synced(report, "### A sub-heading\n\ntext")
