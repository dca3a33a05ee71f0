"""Upgrades with cruft: a project baked from an earlier commit of this repository takes the
current template as a user's project does, and ends exactly where a fresh bake ends.

BASE is a fixed earlier commit of this repository (the test needs the full history and skips
in a shallow clone); HEAD is the repository's committed HEAD when the run starts (edits not
yet committed are not part of it). Each case: `cruft create --checkout BASE` (or a plain
cookiecutter bake and `cruft link`, as the baked README says), `git init` and a commit (users
keep their project in git; cruft update needs a clean tree), in some cases the user's own
edits committed, then `cruft update --checkout HEAD --skip-apply-ask --allow-untracked-files`.

Checks: `cruft check` fails before and passes after; no conflict (unmerged paths, conflict
markers, *.rej files); `.cruft.json` records HEAD and equals the one of a fresh
`cruft create --checkout HEAD` with the project's answers; every file equals that fresh bake
byte for byte, executable bits included (plus the user's edits, which must survive). The
fresh bake is what the rest of this suite lints and runs in full on real services, so the
equality carries those results over; one updated project is also installed (uv, the Python
of its answers) and runs its unit tests and `check-config`. Options whose files the
post-generation hook removes are covered (no example domain; no OpenTelemetry with GitLab CI).
A last case edits a line the template changed: the update must report the conflict and keep
the user's line.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from combos import SUPPORTED
from conftest import (
    REPO_ROOT,
    clean_env,
    note,
    require_python,
    run,
    uv_binary,
    write_cookiecutter_config,
)
from upgrade_edits import (
    NOTE,
    PlacedEdit,
    apply_edit,
    line_the_update_changes,
    place_edit,
    user_edits,
)
from upgrade_support import (
    Tree,
    answers_of,
    commit_all,
    conflicts,
    cookiecutter_then_link,
    cruft_check,
    cruft_create,
    cruft_diff,
    cruft_update,
    git,
    read_state,
    repo_commit,
    snapshot,
    tool_env,
    tree_differences,
)

pytestmark = pytest.mark.bake

# The commit every case starts from (2026-11-22: the full benchmark run on the engine of the
# day). Fixed, so that every later change of the template is part of the update tested.
BASE = "c25bd42e698a92663e04ef9892af53c620dd9e92"
USER_FILE = "docs/our-runbook.md"


@dataclass(frozen=True)
class Case:
    id: str
    combo: str  # the answers: tests/combos.py
    user_edits: bool = False
    linked: bool = False  # a plain cookiecutter bake, then `cruft link`
    check: bool = False  # also `cruft check` before and after the update (2 clones)


CASES = (
    Case("default", "default", check=True),
    Case("no-example-edited", "hash-no-example", user_edits=True),
    Case("no-otel-gitlab-edited", "no-otel-gitlab", user_edits=True),
    Case("no-example-linked", "hash-no-example", linked=True, check=True),
)
INSTALLED = "no-otel-gitlab-edited"


@dataclass(frozen=True)
class Upgraded:
    project: Path
    fresh: Path
    answers: dict[str, Any]
    updated: Tree
    expected: Tree  # the fresh bake at HEAD, with the user's edits
    cruft_state: dict[str, Any]
    fresh_cruft_state: dict[str, Any]
    conflicts: list[str]
    checks: tuple[int, int] | None  # `cruft check` before and after the update
    linked_diff: tuple[int, str] | None  # `cruft diff --exit-code` right after `cruft link`
    edits: list[PlacedEdit]


class Upgrades:
    """Runs each case once per module; the tests share the results."""

    def __init__(self, base: Path, config_file: Path) -> None:
        self.base = base
        self.config_file = config_file
        self.env = tool_env(config_file)
        self.head = repo_commit("HEAD")
        self.base_commit = repo_commit(BASE)
        ancestor = ["git", "merge-base", "--is-ancestor", BASE, self.head]
        if run(ancestor, cwd=REPO_ROOT, check=False).returncode != 0:
            pytest.fail(f"HEAD {self.head[:7]} does not descend from {BASE[:7]}", pytrace=False)
        self._done: dict[str, Upgraded] = {}
        # A case that failed fails its other tests at once, the same way, without a rerun.
        self._failed: dict[str, BaseException] = {}
        self._fresh: dict[str, Path] = {}

    def baked_at_base(self, case: Case, workdir: Path) -> Path:
        """The user's project at BASE, committed to git."""
        answers = next(c for c in SUPPORTED if c.id == case.combo).answers
        if case.linked:
            project = cookiecutter_then_link(
                self.env, self.config_file, BASE, answers, workdir / "base"
            )
            assert read_state(project)["commit"] == self.base_commit
            return project
        project = cruft_create(self.env, BASE, answers, workdir / "base")
        git(project, self.env, "init", "-q")
        commit_all(project, self.env, f"generated from the template at {BASE[:7]}")
        return project

    def fresh(self, answers: dict[str, Any], out: Path) -> Path:
        """A fresh `cruft create` at HEAD with these answers, copied to `out` (one bake per
        set of answers: cases with the same answers share it)."""
        key = json.dumps(answers, sort_keys=True)
        if key not in self._fresh:
            self._fresh[key] = cruft_create(
                self.env, self.head, answers, self.base / "fresh" / str(len(self._fresh))
            )
        copy = out / self._fresh[key].name
        shutil.copytree(self._fresh[key], copy, symlinks=True)
        return copy

    def get(self, case: Case) -> Upgraded:
        if case.id in self._failed:
            raise self._failed[case.id]
        if case.id not in self._done:
            try:
                self._done[case.id] = self._run(case)
            except BaseException as exc:
                self._failed[case.id] = exc
                raise
        return self._done[case.id]

    def _run(self, case: Case) -> Upgraded:
        started = time.monotonic()
        workdir = self.base / case.id
        workdir.mkdir()
        project = self.baked_at_base(case, workdir)
        linked_diff = cruft_diff(self.env, project) if case.linked else None
        answers = answers_of(project)
        fresh = self.fresh(answers, workdir / "fresh")
        placed: list[PlacedEdit] = []
        if case.user_edits:
            placed = [place_edit(edit, project, fresh) for edit in user_edits(answers)]
            for edit in placed:
                apply_edit(project, edit, edit.base_line)
                apply_edit(fresh, edit, edit.head_line)
            for root in (project, fresh):
                (root / USER_FILE).write_text("# Our runbook\n\nNot from the template.\n")
            commit_all(project, self.env, "our edits")
        before = cruft_check(self.env, project, self.head) if case.check else -1
        cruft_update(self.env, project, self.head)
        checks = (before, cruft_check(self.env, project, self.head)) if case.check else None
        upgraded = Upgraded(
            project=project,
            fresh=fresh,
            answers=answers,
            updated=snapshot(project),
            expected=snapshot(fresh),
            cruft_state=read_state(project),
            fresh_cruft_state=read_state(fresh),
            conflicts=conflicts(project, self.env),
            checks=checks,
            linked_diff=linked_diff,
            edits=placed,
        )
        elapsed = time.monotonic() - started
        note(f"upgrade {case.id:<22} {BASE[:7]} -> {self.head[:7]} in {elapsed:5.1f}s")
        return upgraded


@pytest.fixture(scope="module")
def upgrades(tmp_path_factory: pytest.TempPathFactory) -> Upgrades:
    # A config of its own: the linked case reads the one replay file its bake writes.
    config = write_cookiecutter_config(tmp_path_factory.mktemp("cookiecutter-upgrades"))
    return Upgrades(tmp_path_factory.mktemp("upgrades"), config)


@pytest.fixture(params=CASES, ids=lambda case: case.id)
def upgraded(request: pytest.FixtureRequest, upgrades: Upgrades) -> Upgraded:
    case: Case = request.param
    return upgrades.get(case)


def test_update_applies_without_conflict(upgraded: Upgraded) -> None:
    assert upgraded.conflicts == [], "\n".join(upgraded.conflicts)


def test_cruft_json_records_head(upgraded: Upgraded, upgrades: Upgrades) -> None:
    assert upgraded.cruft_state["commit"] == upgrades.head
    assert upgraded.cruft_state["context"]["cookiecutter"]["_commit"] == upgrades.head
    assert upgraded.cruft_state == upgraded.fresh_cruft_state


@pytest.mark.parametrize("case", [c for c in CASES if c.check], ids=lambda c: c.id)
def test_cruft_check_fails_before_and_passes_after(case: Case, upgrades: Upgrades) -> None:
    assert upgrades.get(case).checks == (1, 0)


@pytest.mark.parametrize("case", [c for c in CASES if c.linked], ids=lambda c: c.id)
def test_cruft_diff_is_empty_right_after_link(case: Case, upgrades: Upgrades) -> None:
    """The README's check of the linked commit: no edits yet, so no difference."""
    linked_diff = upgrades.get(case).linked_diff
    assert linked_diff is not None
    assert linked_diff[0] == 0, linked_diff[1][-3000:]


def test_updated_project_equals_a_fresh_bake(upgraded: Upgraded) -> None:
    assert len(upgraded.updated) > 100, sorted(upgraded.updated)
    assert upgraded.updated == upgraded.expected, tree_differences(
        upgraded.updated, upgraded.expected
    )


@pytest.mark.parametrize("case", [c for c in CASES if c.user_edits], ids=lambda c: c.id)
def test_user_edits_survive(case: Case, upgrades: Upgrades) -> None:
    upgraded = upgrades.get(case)
    assert len(upgraded.edits) == 2
    for edit in upgraded.edits:
        lines = (upgraded.project / edit.path).read_text().splitlines(keepends=True)
        assert lines[edit.head_line : edit.head_line + len(edit.new_lines)] == edit.new_lines
    notes = [
        path for path, (_, data) in upgraded.updated.items() if f"# Ours: {NOTE}".encode() in data
    ]
    assert sorted(notes) == sorted(edit.path for edit in upgraded.edits)
    assert (upgraded.project / USER_FILE).read_text().startswith("# Our runbook")


def test_updated_project_installs_and_passes_its_unit_tests(
    upgrades: Upgrades, tmp_path: Path
) -> None:
    """For real, once: the updated project, with the user's edits, in a fresh venv."""
    upgraded = upgrades.get(next(c for c in CASES if c.id == INSTALLED))
    python = require_python(str(upgraded.answers["python_version"]))
    uv = uv_binary()
    assert uv is not None, "uv not found: run the tests with ./scripts/test.sh"
    venv, env = tmp_path / "venv", clean_env(UV_PYTHON_DOWNLOADS="never")
    started = time.monotonic()
    run([uv, "venv", "--quiet", "--python", python, venv], cwd=tmp_path, env=env)
    python_in_venv = venv / "bin" / "python"
    install: list[str | Path] = [uv, "pip", "install", "--quiet", "--python", python_in_venv]
    run([*install, "-e", f"{upgraded.project}[dev]"], cwd=tmp_path, env=env, timeout=900)
    installed = time.monotonic() - started
    unit: list[str | Path] = [python_in_venv, "-m", "pytest", "tests/unit", "-q"]
    tests = run([*unit, "-p", "no:cacheprovider"], cwd=upgraded.project, env=clean_env(venv))
    passed = re.search(r"(\d+) passed", tests.stdout)
    assert passed is not None, tests.stdout[-2000:]
    assert int(passed[1]) >= 50, tests.stdout[-2000:]
    assert not re.search(r"\d+ (failed|error)", tests.stdout), tests.stdout[-2000:]
    slug = str(upgraded.answers["project_slug"])
    checked = run([venv / "bin" / slug, "check-config"], cwd=upgraded.project, env=clean_env(venv))
    boxes = yaml.safe_load((upgraded.project / "config/boxes.yaml").read_text())
    names = [name for kind in ("outbox", "inbox") for name in boxes[kind]]
    assert len(names) >= 2, boxes
    assert [name for name in names if name not in checked.stdout] == [], checked.stdout
    note(f"upgrade {INSTALLED}: installed in {installed:.1f}s, {passed[1]} unit tests passed")


def test_an_edit_the_template_also_changed_is_reported_not_lost(upgrades: Upgrades) -> None:
    """The user changed a line the update changes too. cruft says "Good work!" and exits 0
    (the baked README tells users to look for conflicts): the conflict must be there to find,
    with the user's line kept."""
    workdir = upgrades.base / "conflict"
    workdir.mkdir()
    project = upgrades.baked_at_base(Case("conflict", "default"), workdir)
    fresh = upgrades.get(CASES[0]).fresh  # the default answers at HEAD, as baked
    path, line = line_the_update_changes(snapshot(project), snapshot(fresh), "pyproject.toml")
    before = (project / path).read_text().splitlines(keepends=True)
    ours = before[line].rstrip("\n") + "  # ours\n"
    before[line] = ours
    (project / path).write_text("".join(before))
    commit_all(project, upgrades.env, "our edit")
    output = cruft_update(upgrades.env, project, upgrades.head)
    found = conflicts(project, upgrades.env)
    assert any(entry.endswith(f": {path}") for entry in found), (found, output[-2000:])
    assert ours in (project / path).read_text(), "the user's line is gone"
