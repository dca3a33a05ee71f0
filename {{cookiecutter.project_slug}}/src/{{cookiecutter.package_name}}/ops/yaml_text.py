"""Edits of the boxes file as text, so its comments and layout survive.

Only block-style YAML is edited (what the template writes); anything else is refused with
a message that says what to add by hand.
"""

from __future__ import annotations

import re

from .errors import OpsError


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _block_end(lines: list[str], start: int, indent: int) -> int:
    """Index after the block that starts at `start` (lines indented deeper than `indent`),
    leaving out trailing blank and comment lines (they belong to what follows)."""
    end = start + 1
    last = start
    while end < len(lines):
        if _content(lines[end]):
            if _indent(lines[end]) <= indent:
                break
            last = end
        end += 1
    return last + 1


def add_to_section(text: str, section: str, block: str) -> str:
    """Append `block` (already indented) at the end of top-level mapping `section`."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    header = re.compile(rf"^{section}:\s*(#.*)?$")
    for index, line in enumerate(lines):
        if header.match(line.rstrip("\n")):
            end = _block_end(lines, index, 0)
            return "".join([*lines[:end], block, *lines[end:]])
    if any(re.match(rf"^{section}\s*:", line) for line in lines):
        raise OpsError(
            f"the boxes file's '{section}:' is not a block mapping; add this by hand:\n{block}"
        )
    return "".join(lines) + f"\n{section}:\n{block}"


def add_transport(text: str, section: str, box: str, entry: list[str]) -> str:
    """Append a list entry (lines without indentation) to `section.box.transports`."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    manual = f"add this under {section}.{box}.transports by hand:\n- " + "\n  ".join(entry)
    section_at = next(
        (i for i, ln in enumerate(lines) if re.match(rf"^{section}:\s*(#.*)?$", ln.rstrip("\n"))),
        None,
    )
    if section_at is None:
        raise OpsError(f"no block '{section}:' in the boxes file; {manual}")
    section_end = _block_end(lines, section_at, 0)
    box_at = next(
        (
            i
            for i in range(section_at + 1, section_end)
            if re.match(rf"^\s+{re.escape(box)}:\s*(#.*)?$", lines[i].rstrip("\n"))
        ),
        None,
    )
    if box_at is None:
        raise OpsError(f"box {box} is not a block mapping in the boxes file; {manual}")
    box_indent = _indent(lines[box_at])
    box_end = _block_end(lines, box_at, box_indent)
    key_at = next(
        (
            i
            for i in range(box_at + 1, box_end)
            if re.match(r"^\s+transports:\s*(#.*)?$", lines[i].rstrip("\n"))
            and _indent(lines[i]) > box_indent
        ),
        None,
    )
    if key_at is None:
        raise OpsError(f"{section}.{box}.transports is not a block list; {manual}")
    key_indent = _indent(lines[key_at])
    list_end = key_at + 1
    item_indent = key_indent + 2
    for i in range(key_at + 1, box_end):
        if not _content(lines[i]):
            continue
        if _indent(lines[i]) < key_indent or (
            _indent(lines[i]) == key_indent and not lines[i].lstrip().startswith("-")
        ):
            break
        if lines[i].lstrip().startswith("-") and list_end == key_at + 1:
            item_indent = _indent(lines[i])
        list_end = i + 1
    pad = " " * item_indent
    new = [f"{pad}- {entry[0]}\n", *(f"{pad}  {line}\n" for line in entry[1:])]
    return "".join([*lines[:list_end], *new, *lines[list_end:]])
