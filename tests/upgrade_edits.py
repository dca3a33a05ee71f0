"""User edits for tests/test_upgrade.py: the ones that must survive an update, placed where
the update does not reach, and a line the update changes, where an edit must conflict.

Why placed, not fixed: the template keeps changing, and an edit on a line the template also
changed is a real conflict (git cannot know which side wins). A test of "a user's edit
survives an update" must edit a line the update leaves alone, whatever the template's
history; `place_edit` finds one (the edited line and CONTEXT lines around it unchanged between
the two renders, so no hunk of the update includes it) and says so when none is left.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from upgrade_support import Tree

# A line of a YAML mapping: the user's comment goes above it, with its indentation.
YAML_KEY = re.compile(r"^\s*[a-z_]+:")
NOTE = "reviewed with the payments team, see docs/our-runbook.md"
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


def line_the_update_changes(old: Tree, new: Tree, prefer: str) -> tuple[str, int]:
    """A text file and the index of a line in it that the update changes or removes (in the
    file `prefer` if it has one): where a user's edit must conflict."""
    changed = sorted(path for path in old.keys() & new.keys() if old[path][1] != new[path][1])
    for path in sorted(changed, key=lambda path: path != prefer):
        if b"\0" in old[path][1]:
            continue
        before = old[path][1].decode(errors="replace").splitlines(keepends=True)
        after = new[path][1].decode(errors="replace").splitlines(keepends=True)
        opcodes = difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
        for tag, i1, _, _, _ in opcodes:
            if tag in ("replace", "delete"):
                return path, i1
    pytest.fail(f"the update changes or removes no line of a text file: {changed}", pytrace=False)


def note_above(line: str) -> list[str]:
    """The user's comment line, indented like `line`, then `line`."""
    return [f"{line[: len(line) - len(line.lstrip())]}# Ours: {NOTE}\n", line]


def user_edits(answers: dict[str, Any]) -> list[Edit]:
    """The user notes something above a key of config/boxes.yaml and above a class, function
    or method of their outbox transport module (comments: the unit tests, which read the
    boxes file, keep their expectations)."""
    package, item = answers["package_name"], answers["outbox_item"]
    return [
        Edit(
            "config/boxes.yaml",
            lambda line: YAML_KEY.match(line) is not None,
            note_above,
        ),
        Edit(
            f"src/{package}/transports/{item}_outbox_item.py",
            lambda line: line.lstrip().startswith(("class ", "def ", "async def ", "@")),
            note_above,
        ),
    ]
