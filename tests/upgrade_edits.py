"""User edits for tests/test_upgrade.py, placed where the update does not reach.

Why placed, not fixed: the template keeps changing, and an edit on a line the template also
changed is a real conflict (git cannot know which side wins). A test of "a user's edit
survives an update" must edit a line the update leaves alone, whatever the template's
history; `place_edit` finds one (the edited line and CONTEXT lines around it unchanged between
the two renders, so no hunk of the update includes it) and says so when none is left.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

# Around an edited line, this many lines must be unchanged by the update (a hunk's context).
CONTEXT = 3


@dataclass(frozen=True)
class Edit:
    """Replace the last line `fits` accepts by `change(line)` (one or more lines)."""

    path: str
    fits: Callable[[str], bool]
    change: Callable[[str], list[str]]


@dataclass(frozen=True)
class PlacedEdit:
    path: str
    base_line: int
    head_line: int
    new_lines: list[str]


def place_edit(edit: Edit, base: Path, head: Path) -> PlacedEdit:
    """Where `edit` goes in the project baked at BASE and in the fresh bake at HEAD: the last
    fitting line that the update leaves alone with CONTEXT lines on each side."""
    old = (base / edit.path).read_text().splitlines(keepends=True)
    new = (head / edit.path).read_text().splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, _ in reversed(matcher.get_opcodes()):
        if tag != "equal":
            continue
        for k in reversed(range(i1, i2)):
            inside = max(k - CONTEXT, 0) >= i1 and min(k + CONTEXT, len(old) - 1) < i2
            if inside and edit.fits(old[k]):
                return PlacedEdit(edit.path, k, j1 + (k - i1), edit.change(old[k]))
    pytest.fail(
        f"no line of {edit.path} fits the user's edit and is left alone by the update from "
        f"BASE to HEAD ({CONTEXT} lines around it unchanged): the template changed them all; "
        "edit another line or file in tests/test_upgrade.py",
        pytrace=False,
    )


def apply_edit(root: Path, placed: PlacedEdit, line: int) -> None:
    path = root / placed.path
    lines = path.read_text().splitlines(keepends=True)
    lines[line : line + 1] = placed.new_lines
    path.write_text("".join(lines))
