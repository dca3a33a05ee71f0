"""Helpers of tests/test_upgrade.py: cruft, cookiecutter and git as a user runs them on a
project, trees compared byte for byte, and conflicts found.

cruft runs as a process (the tooling venv's console script) with COOKIECUTTER_CONFIG set,
so neither the user's cookiecutter config nor their replay files take part; git commits with
an identity of its own. `cruft update` exits 0 even when a hunk conflicted, so `conflicts`
looks for what a conflict leaves: unmerged index entries, conflict markers, *.rej files.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cookiecutter.main import cookiecutter

from conftest import REPO_ROOT, clean_env, run

CRUFT = Path(sys.executable).parent / "cruft"
# Lines a merge leaves in a file when both sides changed the same place.
CONFLICT_MARKER = re.compile(rb"^(<<<<<<<|>>>>>>>)( |$)", re.M)

Tree = dict[str, tuple[bool, bytes]]


def tool_env(cookiecutter_config: Path) -> dict[str, str]:
    """cruft and git isolated from the user's cookiecutter config, with a commit identity."""
    identity = {
        f"GIT_{role}_{field}": value
        for role in ("AUTHOR", "COMMITTER")
        for field, value in (("NAME", "Upgrade Test"), ("EMAIL", "upgrade-test@example.invalid"))
    }
    env = clean_env(COOKIECUTTER_CONFIG=str(cookiecutter_config))
    env.update(identity)
    return env


def git(project: Path, env: dict[str, str], *args: str) -> str:
    command = ["git", "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main", *args]
    return run(command, cwd=project, env=env).stdout


def commit_all(project: Path, env: dict[str, str], message: str) -> None:
    git(project, env, "add", "-A")
    git(project, env, "commit", "-q", "-m", message)


def repo_commit(ref: str) -> str:
    """The full hash of `ref` in this repository; skips in a shallow clone, which lacks the
    history an upgrade starts from."""
    try:
        shallow = subprocess.run(
            ["git", "rev-parse", "--is-shallow-repository"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.fail(
            f"{REPO_ROOT} is not a git repository ({exc}): the upgrade test bakes earlier "
            "commits of it; run it in a clone",
            pytrace=False,
        )
    if shallow == "true":
        pytest.skip(
            "shallow clone: the upgrade test bakes an earlier commit of the template "
            "(git fetch --unshallow)"
        )
    found = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    if found.returncode != 0:
        pytest.fail(f"commit {ref} is not in this repository's history", pytrace=False)
    return found.stdout.strip()


def read_state(project: Path) -> dict[str, Any]:
    """The project's .cruft.json."""
    state: dict[str, Any] = json.loads((project / ".cruft.json").read_text())
    return state


def answers_of(project: Path) -> dict[str, Any]:
    """The answers recorded in .cruft.json (cookiecutter's `_` entries left out)."""
    context = read_state(project)["context"]["cookiecutter"]
    return {key: value for key, value in context.items() if not key.startswith("_")}


# --------------------------------------------------------------------------------------
# cruft and cookiecutter, as the baked README tells users to run them.


def cruft(env: dict[str, str], *args: str, cwd: Path, check: bool = True) -> str:
    if not CRUFT.exists():
        pytest.fail(f"{CRUFT} is missing: run the tests with ./scripts/test.sh", pytrace=False)
    return run([CRUFT, *args], cwd=cwd, env=env, check=check).stdout


def only_dir(parent: Path) -> Path:
    (found,) = [path for path in parent.iterdir() if path.is_dir()]
    return found


def cruft_create(env: dict[str, str], commit: str, answers: dict[str, Any], out: Path) -> Path:
    """`cruft create` of this repository at `commit`; returns the project directory."""
    context = json.dumps(answers)
    out.parent.mkdir(parents=True, exist_ok=True)
    args = ["--no-input", "--checkout", commit, "--output-dir", str(out), "--extra-context"]
    cruft(env, "create", str(REPO_ROOT), *args, context, cwd=out.parent)
    return only_dir(out)


def cookiecutter_then_link(
    env: dict[str, str], config_file: Path, commit: str, answers: dict[str, Any], out: Path
) -> Path:
    """A plain cookiecutter bake at `commit` put in git, then `cruft link` with the answers
    of cookiecutter's replay file and the commit it was generated from, committed."""
    project = Path(
        cookiecutter(
            f"git+file://{REPO_ROOT}",
            checkout=commit,
            no_input=True,
            extra_context=dict(answers),
            output_dir=str(out),
            config_file=str(config_file),
        )
    )
    git(project, env, "init", "-q")
    commit_all(project, env, "generated with cookiecutter")
    replays = list((config_file.parent / "replay").glob("*.json"))
    assert len(replays) == 1, replays
    replayed = json.dumps(json.loads(replays[0].read_text())["cookiecutter"])
    args = ["--checkout", commit, "--no-input", "--extra-context", replayed]
    cruft(env, "link", str(REPO_ROOT), *args, "--project-dir", str(project), cwd=out)
    commit_all(project, env, "linked to its template with cruft")
    return project


def cruft_update(env: dict[str, str], project: Path, commit: str) -> str:
    args = ["--checkout", commit, "--skip-apply-ask", "--allow-untracked-files"]
    return cruft(env, "update", "--project-dir", str(project), *args, cwd=project.parent)


def cruft_diff(env: dict[str, str], project: Path) -> tuple[int, str]:
    """`cruft diff --exit-code`: 1 and the diff when the project's files differ from the
    template at the recorded commit, rendered with the recorded answers; else 0."""
    args: list[str | Path] = [CRUFT, "diff", "--exit-code", "--project-dir", project]
    result = run(args, cwd=project.parent, env=env, check=False)
    return result.returncode, result.stdout


def cruft_check(env: dict[str, str], project: Path, commit: str) -> int:
    """`cruft check`'s exit code: 0 up to date with `commit`, 1 not."""
    args: list[str | Path] = [CRUFT, "check", "--project-dir", project, "--checkout", commit]
    return run(args, cwd=project.parent, env=env, check=False).returncode


# --------------------------------------------------------------------------------------
# Trees and conflicts.


def snapshot(root: Path) -> Tree:
    """Every file under root but .git and .cruft.json: (executable?, bytes) by path."""
    files: Tree = {}
    for path in root.rglob("*"):
        relative = path.relative_to(root).as_posix()
        if relative == ".cruft.json" or relative.split("/")[0] == ".git":
            continue
        if path.is_symlink():
            files[relative] = (False, b"symlink -> " + os.readlink(path).encode())
        elif path.is_file():
            files[relative] = (os.access(path, os.X_OK), path.read_bytes())
    return files


def tree_differences(updated: Tree, expected: Tree) -> str:
    """What differs, a line each, then the diff of the first file whose bytes differ."""
    lines = [f"only in the updated project: {p}" for p in sorted(updated.keys() - expected.keys())]
    lines += [f"only in the fresh bake: {p}" for p in sorted(expected.keys() - updated.keys())]
    first_diff: list[str] = []
    for path in sorted(updated.keys() & expected.keys()):
        (x_updated, data_updated), (x_expected, data_expected) = updated[path], expected[path]
        if x_updated != x_expected:
            lines.append(f"executable bit differs: {path}")
        if data_updated != data_expected:
            lines.append(f"content differs: {path}")
            if not first_diff:
                first_diff = list(
                    difflib.unified_diff(
                        data_expected.decode(errors="replace").splitlines(),
                        data_updated.decode(errors="replace").splitlines(),
                        f"fresh/{path}",
                        f"updated/{path}",
                        lineterm="",
                    )
                )[:60]
    return "\n".join(lines + first_diff)


def conflicts(project: Path, env: dict[str, str]) -> list[str]:
    """Unmerged paths, files with conflict markers and *.rej files, one line each."""
    unmerged = {line.split("\t")[-1] for line in git(project, env, "ls-files", "-u").splitlines()}
    found = [f"unmerged: {path}" for path in sorted(unmerged)]
    for relative, (_, data) in sorted(snapshot(project).items()):
        if relative.endswith(".rej"):
            found.append(f"rejected hunks: {relative}")
        elif CONFLICT_MARKER.search(data):
            found.append(f"conflict markers: {relative}")
    return found
