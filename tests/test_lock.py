"""Reproducible installs of a baked project, as its README and the post-generation hint tell a
new user: `uv lock` once (then commit uv.lock), `uv sync --locked --extra dev` into a fresh
venv; a stale lock is refused; the Dockerfile's builder stage, run for real outside Docker,
installs exactly the lock (no dev tools) and stops with a message when there is no lock; the
generated CI files install with `--locked` and the same pinned uv as the Dockerfile."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from combos import SUPPORTED
from conftest import bake, clean_env, require_python, resolve_context, run, uv_binary

pytestmark = pytest.mark.bake

DEFAULT = next(combo for combo in SUPPORTED if combo.id == "default")


def _uv() -> Path:
    uv = uv_binary()
    if uv is None:
        pytest.fail("uv not found: run the tests with ./scripts/test.sh", pytrace=False)
    return uv


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory, cookiecutter_config: Path) -> Path:
    """A fresh bake of the default combination with `uv lock` run in it, as a user would."""
    project = bake(DEFAULT.answers, tmp_path_factory.mktemp("lock"), cookiecutter_config)
    version = (project / ".python-version").read_text().split()[0]
    env = clean_env(UV_PYTHON_DOWNLOADS="never", UV_PYTHON=str(require_python(version)))
    run([_uv(), "lock"], cwd=project, env=env, timeout=300)
    return project


def _lock_packages(project: Path) -> dict[str, str]:
    lock = tomllib.loads((project / "uv.lock").read_text())
    return {p["name"]: p.get("version", "") for p in lock["package"]}


def _dockerfile_stage(project: Path, stage: str) -> tuple[dict[str, str], list[str]]:
    """The ARG/ENV values and the RUN commands of one stage, continuation lines joined."""
    values: dict[str, str] = {}
    runs: list[str] = []
    current = None
    pending = ""
    for line in (project / "Dockerfile").read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        instruction = pending + stripped
        pending = ""
        keyword, _, rest = instruction.partition(" ")
        if keyword == "FROM":
            current = rest.split()[-1]
        elif current != stage:
            continue
        elif keyword in ("ARG", "ENV"):
            for name, value in re.findall(r"(\w+)=(\"[^\"]*\"|\S+)", rest):
                values[name] = value.strip('"')
        elif keyword == "RUN":
            runs.append(rest)
    return values, runs


def test_lock_holds_every_dependency_within_the_declared_bounds(locked: Path) -> None:
    packages = _lock_packages(locked)
    slug = locked.name
    assert slug in packages
    for name in ("fastapi", "sqlalchemy", "confluent-kafka", "testcontainers", "packaging"):
        assert name in packages, f"{name} is not in uv.lock"
    assert int(packages["testcontainers"].split(".")[0]) == 4
    major, minor = (int(part) for part in packages["pytest-asyncio"].split(".")[:2])
    assert (major, minor) >= (0, 26)


def test_sync_locked_into_a_fresh_venv(locked: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    env = clean_env(UV_PYTHON_DOWNLOADS="never", UV_PROJECT_ENVIRONMENT=str(venv))
    run([_uv(), "sync", "--locked", "--extra", "dev"], cwd=locked, env=env, timeout=600)
    packages = _lock_packages(locked)
    listed = run(
        [
            venv / "bin" / "python",
            "-c",
            "import json, importlib.metadata as m; "
            "print(json.dumps({d.metadata['Name'].lower(): d.version for d in m.distributions()}))",
        ],
        cwd=locked,
        env=env,
    )
    installed = json.loads(listed.stdout.strip().splitlines()[-1])
    for name in ("fastapi", "testcontainers", "pytest-asyncio", "confluent-kafka"):
        assert installed[name] == packages[name], name
    help_text = run([venv / "bin" / locked.name, "--help"], cwd=locked, env=env).stdout
    assert "migrate" in help_text
    run(
        [
            venv / "bin" / "python",
            "-W",
            "error::DeprecationWarning",
            "-c",
            "import testcontainers.community.kafka, testcontainers.community.postgres",
        ],
        cwd=locked,
        env=env,
    )


def test_a_stale_lock_is_refused(locked: Path, tmp_path: Path) -> None:
    stale = tmp_path / "stale"
    shutil.copytree(locked, stale, ignore=shutil.ignore_patterns(".venv"))
    pyproject = stale / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace("dependencies = [\n", 'dependencies = [\n    "idna>=3",\n', 1)
    )
    assert "idna>=3" in pyproject.read_text()
    env = clean_env(UV_PYTHON_DOWNLOADS="never", UV_PROJECT_ENVIRONMENT=str(tmp_path / "venv"))
    result = run([_uv(), "sync", "--locked"], cwd=stale, env=env, check=False, timeout=300)
    assert result.returncode != 0
    assert "needs to be updated" in result.stdout, result.stdout


def _run_builder(project: Path, workdir: Path, with_lock: bool) -> subprocess.CompletedProcess[str]:
    """The builder stage's RUN commands after uv's own install, in order, with /opt/venv moved
    under `workdir` and the local interpreter for the image's."""
    values, runs = _dockerfile_stage(project, "builder")
    assert re.fullmatch(r"\d+\.\d+\.\d+", values["UV_VERSION"])
    assert runs[0] == 'pip install "uv==${UV_VERSION}"'
    venv = workdir / "opt-venv"
    workdir.mkdir()
    for name in ("pyproject.toml", "README.md", *(["uv.lock"] if with_lock else [])):
        shutil.copy(project / name, workdir / name)
    # The image builds without uv's cache; here the user's cache may serve the downloads.
    image_env = {
        k: v for k, v in values.items() if k.startswith(("UV_", "PIP_")) and k != "UV_NO_CACHE"
    }
    env = clean_env(None, **image_env)
    # The image's interpreter and venv path, moved to this machine.
    env["UV_PYTHON"] = str(require_python((project / ".python-version").read_text().split()[0]))
    env["UV_PROJECT_ENVIRONMENT"] = str(venv)
    script = ["set -e"]
    for command in runs[1:]:
        if command.startswith("uv sync") and "--no-install-project" not in command:
            script.append(f"cp -r {project / 'src'} ./src")
        script.append(command)
    return subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=workdir,
        env={**env, "PATH": f"{_uv().parent}{os.pathsep}{env['PATH']}"},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_dockerfile_builder_installs_exactly_the_lock(locked: Path, tmp_path: Path) -> None:
    result = _run_builder(locked, tmp_path / "build", with_lock=True)
    assert result.returncode == 0, result.stdout + result.stderr
    venv = tmp_path / "build" / "opt-venv"
    assert (venv / "bin" / locked.name).exists()
    assert not (venv / "bin" / "pytest").exists(), "dev tools in the image"
    version = run(
        [venv / "bin" / "python", "-c", "import fastapi; print(fastapi.__version__)"],
        cwd=tmp_path,
    ).stdout.strip()
    assert version == _lock_packages(locked)["fastapi"]


def test_dockerfile_builder_without_a_lock_says_what_to_do(locked: Path, tmp_path: Path) -> None:
    result = _run_builder(locked, tmp_path / "build", with_lock=False)
    assert result.returncode == 1
    assert "uv.lock is missing: run 'uv lock' and commit uv.lock" in result.stderr


def _ci_installs(text: str) -> list[str]:
    return [
        line.strip(" -")
        for line in text.splitlines()
        if re.search(r"\buv (sync|pip install)|pip install .*\buv\b", line)
    ]


@pytest.mark.parametrize(
    ("ci", "path"), [("github", ".github/workflows/ci.yml"), ("gitlab", ".gitlab-ci.yml")]
)
def test_ci_installs_the_lock_with_the_dockerfiles_uv(
    ci: str, path: str, tmp_path: Path, cookiecutter_config: Path
) -> None:
    project = bake({"ci": ci}, tmp_path, cookiecutter_config)
    text = (project / path).read_text()
    uv_version = _dockerfile_stage(project, "builder")[0]["UV_VERSION"]
    parsed: Any = yaml.safe_load(text)
    variables = parsed.get("env") or parsed.get("variables")
    assert variables["UV_VERSION"] == uv_version
    installs = _ci_installs(text)
    assert installs, f"{path} installs nothing"
    syncs = [line for line in installs if "uv sync" in line]
    assert syncs
    assert all(line == "uv sync --locked --extra dev" for line in syncs), syncs
    assert not [line for line in installs if "uv pip install" in line]
    assert all('"uv==$UV_VERSION"' in line for line in installs if "pip install" in line)
    assert "uv export --locked" in text


def test_the_post_generation_hint_locks_first_and_never_calls_a_bare_script(
    post_gen: ModuleType,
) -> None:
    context = resolve_context({})
    slug = context["project_slug"]
    lines = [line.split("#")[0].strip() for line in post_gen.next_steps(context).splitlines()]
    commands = [line for line in lines if line]
    lock = commands.index("uv lock")
    assert lock < commands.index("docker compose up")
    assert lock < commands.index("uv sync --locked --extra dev")
    runs = [line for line in commands if slug in line.split() and not line.startswith("cd ")]
    assert runs
    for line in runs:
        for part in line.split("&&"):
            words = part.split()
            assert words[:3] == ["uv", "run", slug], f"not on PATH without uv run: {line}"
