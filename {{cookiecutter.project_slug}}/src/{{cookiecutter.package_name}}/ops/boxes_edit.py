"""Edits of config/boxes.yaml through a round-trip YAML parser, so its comments, quoting,
flow mappings and layout survive.

`generate` adds a box or a transport entry; nothing else of the file changes. A blank line
or comment that ended the enlarged section (or box) still ends it: it moves from the old
last entry to the new one, instead of ending up between them.
"""

from __future__ import annotations

import io
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from .errors import OpsError


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.indent(mapping=2, sequence=4, offset=2)  # the template's `- class:` under `transports:`
    yaml.width = 4096  # never fold a long class path or topic
    return yaml


def load(text: str, source: str) -> CommentedMap:
    """The document of a boxes file, with its comments; the top level must be a mapping."""
    try:
        document = _yaml().load(text)
    except YAMLError as exc:
        raise OpsError(f"{source}: not valid YAML: {exc}") from None
    if document is None:
        document = CommentedMap()
    if not isinstance(document, CommentedMap):
        raise OpsError(f"{source}: the top level must be a mapping")
    return document


def dump(document: CommentedMap) -> str:
    out = io.StringIO()
    _yaml().dump(document, out)
    return out.getvalue()


def _last(node: Any) -> tuple[CommentedMap | CommentedSeq, Any] | None:
    """The innermost collection holding the last scalar of `node`, and that scalar's key:
    where the parser attached what follows the node (blank lines, comments)."""
    found = None
    while isinstance(node, CommentedMap | CommentedSeq) and len(node):
        key = list(node)[-1] if isinstance(node, CommentedMap) else len(node) - 1
        found = (node, key)
        node = node[key]
    return found


def _move_trailer(old: Any, new: Any) -> None:
    """Move the comment that follows `old`'s last scalar to after `new`'s last scalar."""
    source, target = _last(old), _last(new)
    if source is None or target is None:
        return
    holder, key = source
    tokens = holder.ca.items.get(key)
    if not tokens:
        return
    at = 2 if isinstance(holder, CommentedMap) else 0
    trailer = tokens[at] if len(tokens) > at else None
    if trailer is None:
        return
    tokens[at] = None
    new_holder, new_key = target
    slot = 2 if isinstance(new_holder, CommentedMap) else 0
    new_tokens = new_holder.ca.items.setdefault(new_key, [None, None, None, None])
    new_tokens[slot] = trailer


def add_box(document: CommentedMap, section: str, entry_text: str) -> None:
    """Add the box of `entry_text` (one `name: {...}` mapping, as the scaffold renders it)
    at the end of `section`; refused if a box of that name exists in either section."""
    entry = _yaml().load(entry_text)
    if not isinstance(entry, CommentedMap) or len(entry) != 1:
        raise OpsError("internal error: the box scaffold must render one mapping")
    name = next(iter(entry))
    for kind in ("outbox", "inbox"):
        if name in (document.get(kind) or {}):
            raise OpsError(f"box {name} exists already in the boxes file")
    boxes = document.get(section)
    if boxes is None:
        boxes = document[section] = CommentedMap()
    if not isinstance(boxes, CommentedMap):
        raise OpsError(f"the boxes file's '{section}:' is not a mapping of boxes")
    previous = boxes[list(boxes)[-1]] if boxes else None
    boxes[name] = entry[name]
    _move_trailer(previous, entry[name])


def add_transport(document: CommentedMap, section: str, box: str, entry: dict[str, Any]) -> None:
    """Append `entry` to `section.box.transports`."""
    config = (document.get(section) or {}).get(box)
    if not isinstance(config, CommentedMap):
        raise OpsError(f"box {box} is not a mapping in the boxes file")
    transports = config.get("transports")
    if transports is None:
        transports = config["transports"] = CommentedSeq()
    if not isinstance(transports, CommentedSeq):
        raise OpsError(f"{section}.{box}.transports is not a list")
    previous = transports[-1] if transports else None
    item = CommentedMap(entry)
    transports.append(item)
    _move_trailer(previous if previous is not None else config, item)
