"""The generated CI pipelines run the checks the baked docs promise, after the install."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import bake


def _steps(ci: str, parsed: Any) -> list[str]:
    """The lint job's commands, in order."""
    if ci == "github":
        return [step.get("run", "") for step in parsed["jobs"]["lint"]["steps"]]
    return list(parsed["lint"]["script"])


@pytest.mark.parametrize(
    ("ci", "path"), [("github", ".github/workflows/ci.yml"), ("gitlab", ".gitlab-ci.yml")]
)
def test_ci_fails_on_a_breaking_event_contract_change(
    ci: str, path: str, tmp_path: Path, cookiecutter_config: Path
) -> None:
    project = bake({"ci": ci}, tmp_path, cookiecutter_config)
    steps = _steps(ci, yaml.safe_load((project / path).read_text()))
    check = "order-service asyncapi --check"
    assert check in steps, steps
    assert steps.index(check) > steps.index("mypy")
    assert (project / "contracts" / "asyncapi.json").is_file()
