"""docs/architecture.md matches the code: every module, class, function and path it names
exists, every subpackage of the engine is described, and the two paths it walks through
(an outbox item from create() to the Kafka ack, an inbox message from Kafka to its handler)
name their steps in order, each step a real function."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType

import outbox_engine

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DOC = PROJECT_ROOT / "docs" / "architecture.md"
ENGINE_DIR = Path(outbox_engine.__file__).parent
# `outbox_engine.relay.processor.BoxProcessor.run_once` or `outbox_engine.relay.claim`
DOTTED = re.compile(r"`(outbox_engine(?:\.\w+)*)(?:\(\))?`")
# `src/outbox_engine/relay/` or `src/outbox_engine/relay/claim.py`
PATH = re.compile(r"`(src/[\w/.]+)`")
# A numbered step of a path: "1. `outbox_engine....`"
STEP = re.compile(r"^\d+\. `(outbox_engine(?:\.\w+)+)(?:\(\))?`", re.MULTILINE)


def resolve(dotted: str) -> object:
    """The object a dotted name refers to: the longest importable module prefix, then
    attributes. Raises if any part is missing."""
    parts = dotted.split(".")
    module: ModuleType | None = None
    for end in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:end]))
        except ModuleNotFoundError:
            continue
        obj: object = module
        for attribute in parts[end:]:
            obj = getattr(obj, attribute)
        return obj
    raise ModuleNotFoundError(dotted)


def unresolved(names: list[str]) -> list[str]:
    """The dotted names that name no module or attribute, each with the reason."""
    missing = []
    for name in names:
        try:
            resolve(name)
        except (ModuleNotFoundError, AttributeError) as exc:
            missing.append(f"{name}: {exc}")
    return missing


def test_every_name_in_the_doc_exists() -> None:
    text = DOC.read_text()
    names = sorted(set(DOTTED.findall(text)))
    assert len(names) >= 40, names
    assert unresolved(names) == []


def test_every_path_in_the_doc_exists() -> None:
    paths = sorted(set(PATH.findall(DOC.read_text())))
    assert len(paths) >= 5, paths
    assert [p for p in paths if not (PROJECT_ROOT / p).exists()] == []


def test_every_engine_subpackage_is_described() -> None:
    text = DOC.read_text()
    subpackages = sorted(
        p.name for p in ENGINE_DIR.iterdir() if p.is_dir() and (p / "__init__.py").exists()
    )
    assert len(subpackages) >= 8
    assert [s for s in subpackages if f"`src/outbox_engine/{s}/`" not in text] == []


def test_both_paths_are_walked_step_by_step() -> None:
    text = DOC.read_text()
    outbox = text.split("## The path of an outbox item", 1)[1].split("\n## ", 1)[0]
    inbox = text.split("## The path of an inbox message", 1)[1].split("\n## ", 1)[0]
    for section in (outbox, inbox):
        steps = STEP.findall(section)
        assert len(steps) >= 5, steps
        assert all(callable(resolve(step)) for step in steps)
    assert "creation.items.Outbox.create" in STEP.findall(outbox)[0]
