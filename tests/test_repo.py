"""The template repository's own Python (hooks/, tests/, bench/) passes ruff; the generated
project is checked after baking instead (tests/test_bake.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import REPO_ROOT, clean_env, run


def test_ruff_check_of_the_template_repo() -> None:
    ruff = Path(sys.executable).parent / "ruff"
    run([ruff, "check", "--no-cache", "."], cwd=REPO_ROOT, env=clean_env())


def test_scripts_are_executable() -> None:
    for name in (
        "test.sh",
        "services-up.sh",
        "services-down.sh",
        "kafka.sh",
        "postgres.sh",
        "connect.sh",
    ):
        script = REPO_ROOT / "scripts" / name
        assert script.is_file(), script
        assert script.stat().st_mode & 0o111, f"{script} is not executable"


def test_every_module_a_combination_runs_exists() -> None:
    """A renamed test module would otherwise drop out of every smoke suite, silently."""
    from combos import SUPPORTED

    baked_tests = REPO_ROOT / "{{cookiecutter.project_slug}}"
    chosen = [module for combo in SUPPORTED for module in combo.modules]
    assert len(chosen) >= 4 * 15
    assert [m for m in chosen if not (baked_tests / m).exists()] == []
