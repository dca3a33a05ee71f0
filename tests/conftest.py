"""Helpers and fixtures of the template's own tests.

- `bake()`: generate a project with cookiecutter's Python API, isolated from the user's
  cookiecutter config and replay files.
- `find_python()`: an interpreter for X.Y by absolute path (pyenv shims resolve per
  directory and baked projects carry a `.python-version`, so a name on PATH is not enough).
- `Bakery` (fixture `bakery`): bakes each supported combination once per session and, when
  asked, installs it into its own venv with uv; tests share the result.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from cookiecutter.generate import generate_context
from cookiecutter.main import cookiecutter
from cookiecutter.prompt import prompt_for_config

from combos import Combo

REPO_ROOT = Path(__file__).resolve().parents[1]
TEMPLATE_DIR = REPO_ROOT / "{{cookiecutter.project_slug}}"
HOOKS_DIR = REPO_ROOT / "hooks"
COOKIECUTTER_JSON = REPO_ROOT / "cookiecutter.json"

# Directories created by installing/linting a baked project, not by the template.
TOOL_DIRS = frozenset(
    {".venv", ".mypy_cache", ".ruff_cache", ".pytest_cache", "__pycache__", "build", "dist"}
)

ALLOW_MISSING_PYTHON = os.environ.get("TEMPLATE_ALLOW_MISSING_PYTHON") == "1"
SERVICES_HOW_TO = (
    "TEST_DATABASE_URL and TEST_KAFKA_BOOTSTRAP_SERVERS are not set: run the tests with "
    "./scripts/test.sh (it starts PostgreSQL and Kafka and exports them)"
)

# --------------------------------------------------------------------------------------
# Notes printed at the end of the run (timings, baked suites' summaries).

_NOTES: list[str] = []


def note(line: str) -> None:
    _NOTES.append(line)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _NOTES:
        terminalreporter.section("template harness")
        for line in _NOTES:
            terminalreporter.write_line(line)


def pytest_report_header() -> list[str]:
    from combos import SUPPORTED

    versions = sorted({str(resolve_context(c.answers)["python_version"]) for c in SUPPORTED})
    found = ", ".join(f"{v}: {find_python(v) or 'MISSING'}" for v in versions)
    services = os.environ.get("TEST_DATABASE_URL") and os.environ.get(
        "TEST_KAFKA_BOOTSTRAP_SERVERS"
    )
    return [
        f"template: interpreters {found}",
        f"template: uv {uv_binary() or 'MISSING'}",
        "template: services "
        + (
            f"{os.environ['TEST_DATABASE_URL']}, kafka {os.environ['TEST_KAFKA_BOOTSTRAP_SERVERS']}"
            if services
            else "not set (run ./scripts/test.sh)"
        ),
    ]


# --------------------------------------------------------------------------------------
# Hooks, contexts, baking.


def load_hook(name: str) -> ModuleType:
    """Import hooks/<name>.py from its path (the Jinja in it is only inside a string)."""
    path = HOOKS_DIR / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"template_hooks_{name}", path)
    assert spec is not None, path
    assert spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def resolve_context(answers: Mapping[str, Any]) -> dict[str, Any]:
    """The context cookiecutter renders with for these answers (defaults filled in, derived
    values such as project_slug and package_name rendered)."""
    context = generate_context(context_file=str(COOKIECUTTER_JSON), extra_context=dict(answers))
    rendered: dict[str, Any] = prompt_for_config(context, no_input=True)
    return rendered


def write_cookiecutter_config(directory: Path) -> Path:
    """A cookiecutter config that keeps replay files out of the user's home and ignores
    their ~/.cookiecutterrc defaults."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "cookiecutter-config.yaml"
    config.write_text(
        f"cookiecutters_dir: {directory / 'cookiecutters'}\nreplay_dir: {directory / 'replay'}\n"
    )
    return config


def bake(answers: Mapping[str, Any], output_dir: Path, config_file: Path) -> Path:
    """Generate a project from this repository; returns the project directory."""
    output_dir.mkdir(parents=True, exist_ok=True)
    project = cookiecutter(
        str(REPO_ROOT),
        no_input=True,
        extra_context=dict(answers),
        output_dir=str(output_dir),
        config_file=str(config_file),
    )
    return Path(project)


# --------------------------------------------------------------------------------------
# Interpreters.


def load_bench_module(name: str) -> ModuleType:
    """bench/<name>.py from its path, for the bench modules that are stdlib only (order,
    procs, compare, notes_sync, find_python): bench/ is not on the tests' path, and these
    import nothing of the package."""
    path = REPO_ROOT / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# bench/find_python.py: the one place that knows where interpreters are.
FINDER = load_bench_module("find_python")


def python_candidates(version: str) -> list[str]:
    """Where Python `version` may be, most specific first."""
    found: list[str] = FINDER.candidates(version, None)
    return found


def find_python(version: str) -> Path | None:
    """An absolute path to a working Python `version` (e.g. "3.12"), or None."""
    uv = uv_binary()
    found: str | None = FINDER.find(version, str(uv) if uv else None)
    return Path(found) if found else None


def require_python(version: str) -> Path:
    """find_python, or fail (skip with TEMPLATE_ALLOW_MISSING_PYTHON=1) saying what to do."""
    found = find_python(version)
    if found:
        return found
    message = (
        f"Python {version} is needed for this combination but was not found (looked at "
        f"{', '.join(python_candidates(version))} and uv-managed interpreters). Install it "
        f"(e.g. `pyenv install {version}`, `uv python install {version}`, or your OS package), "
        f"point TEMPLATE_PYTHON_{version.replace('.', '_')} at it, or set "
        "TEMPLATE_ALLOW_MISSING_PYTHON=1 to skip such combinations."
    )
    if ALLOW_MISSING_PYTHON:
        pytest.skip(message)
    pytest.fail(message, pytrace=False)


def uv_binary() -> Path | None:
    """uv by absolute path: the one installed beside this interpreter (the tooling venv),
    else a uv on PATH that actually runs (a pyenv shim may not)."""
    beside = Path(sys.executable).parent / "uv"
    if beside.exists():
        return beside
    on_path = shutil.which("uv")
    if on_path:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            if (
                subprocess.run([on_path, "--version"], capture_output=True, timeout=30).returncode
                == 0
            ):
                return Path(on_path)
    return None


# --------------------------------------------------------------------------------------
# Running commands.


def clean_env(venv: Path | None = None, **extra: str) -> dict[str, str]:
    """This process's environment without its venv and pytest state, with `venv` first on
    PATH, plus `extra`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTEST_ADDOPTS"}
        and not key.startswith("PYTEST_")
    }
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def run(
    command: Sequence[str | Path],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
    check: bool = True,
    log_file: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command with stdout+stderr merged; on failure (check=True) fail the test with
    the command and the end of its output."""
    args = [str(part) for part in command]
    started = time.monotonic()
    try:
        result = subprocess.run(
            args,
            cwd=cwd,
            env=dict(env) if env is not None else clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        output = (
            exc.stdout.decode(errors="replace")
            if isinstance(exc.stdout, bytes)
            else (exc.stdout or "")
        )
        pytest.fail(
            f"timed out after {timeout:.0f}s: {' '.join(args)}\n(in {cwd})\n{tail(output)}",
            pytrace=False,
        )
    if log_file is not None:
        log_file.write_text(result.stdout)
    if check and result.returncode != 0:
        pytest.fail(
            f"exit code {result.returncode} after {time.monotonic() - started:.1f}s: "
            f"{' '.join(args)}\n(in {cwd})\n--- last lines of output ---\n{tail(result.stdout)}",
            pytrace=False,
        )
    return result


# --------------------------------------------------------------------------------------
# The bakery: each supported combination baked and installed once per session.


@dataclass(frozen=True)
class Baked:
    combo: Combo
    root: Path
    context: dict[str, Any]

    @property
    def slug(self) -> str:
        return str(self.context["project_slug"])

    @property
    def package(self) -> str:
        return str(self.context["package_name"])


@dataclass(frozen=True)
class Installed:
    baked: Baked
    venv: Path

    @property
    def root(self) -> Path:
        return self.baked.root

    def bin(self, name: str) -> Path:
        return self.venv / "bin" / name

    @property
    def script(self) -> Path:
        """The console script, named like the slug."""
        return self.bin(self.baked.slug)

    def env(self, **extra: str) -> dict[str, str]:
        return clean_env(self.venv, **extra)


class Bakery:
    def __init__(self, base: Path, config_file: Path) -> None:
        self.base = base
        self.config_file = config_file
        self._baked: dict[str, Baked] = {}
        self._installed: dict[str, Installed] = {}
        # A failed bake/install fails every test of that combination at once, without retrying.
        self._failed: dict[str, str] = {}

    def _fail_again(self, key: str) -> None:
        if key in self._failed:
            pytest.fail(f"(failed earlier in this session) {self._failed[key]}", pytrace=False)

    def bake(self, combo: Combo) -> Baked:
        key = f"bake:{combo.id}"
        self._fail_again(key)
        if combo.id not in self._baked:
            started = time.monotonic()
            try:
                context = resolve_context(combo.answers)
                root = bake(combo.answers, self.base / combo.id, self.config_file)
            except Exception as exc:
                self._failed[key] = f"baking {combo.id} failed: {type(exc).__name__}: {exc}"
                raise
            self._baked[combo.id] = Baked(combo, root, context)
            note(f"baked {combo.id:<20} in {time.monotonic() - started:5.1f}s -> {root}")
        return self._baked[combo.id]

    def install(self, combo: Combo) -> Installed:
        """A venv with the combination's Python and the baked project `-e '.[dev]'`."""
        key = f"install:{combo.id}"
        self._fail_again(key)
        if combo.id in self._installed:
            return self._installed[combo.id]
        baked = self.bake(combo)
        python = require_python(str(baked.context["python_version"]))
        uv = uv_binary()
        if uv is None:
            pytest.fail("uv not found: run the tests with ./scripts/test.sh", pytrace=False)
        venv = baked.root / ".venv"
        env = clean_env(UV_PYTHON_DOWNLOADS="never")
        started = time.monotonic()
        try:
            # cwd outside the project: nothing there (.python-version, pyproject) steers uv.
            run([uv, "venv", "--quiet", "--python", python, venv], cwd=self.base, env=env)
            run(
                [
                    uv,
                    "pip",
                    "install",
                    "--quiet",
                    # .pyc files at install (as the Dockerfile does): with PYTHONDONTWRITEBYTECODE
                    # set, every start of the service would compile its imports from source.
                    "--compile-bytecode",
                    "--python",
                    venv / "bin" / "python",
                    "-e",
                    f"{baked.root}[dev]",
                ],
                cwd=self.base,
                env=env,
                timeout=900,
            )
        except BaseException as exc:
            self._failed[key] = f"installing {combo.id} failed: {exc}"
            raise
        installed = Installed(baked, venv)
        self._installed[combo.id] = installed
        note(f"installed {combo.id:<17} in {time.monotonic() - started:5.1f}s (Python {python})")
        return installed


# --------------------------------------------------------------------------------------
# Fixtures.


@pytest.fixture(scope="session")
def cookiecutter_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_cookiecutter_config(tmp_path_factory.mktemp("cookiecutter"))


@pytest.fixture(scope="session")
def bakery(tmp_path_factory: pytest.TempPathFactory, cookiecutter_config: Path) -> Bakery:
    return Bakery(tmp_path_factory.mktemp("bakes"), cookiecutter_config)


@pytest.fixture(scope="session")
def pre_gen() -> ModuleType:
    return load_hook("pre_gen_project")


@pytest.fixture(scope="session")
def post_gen() -> ModuleType:
    return load_hook("post_gen_project")


@dataclass(frozen=True)
class Services:
    database_url: str
    kafka_bootstrap_servers: str
    kafka_stop_cmd: str | None
    kafka_start_cmd: str | None
    pg_start_cmd: str | None


@pytest.fixture(scope="session")
def services() -> Services:
    database_url = os.environ.get("TEST_DATABASE_URL")
    kafka = os.environ.get("TEST_KAFKA_BOOTSTRAP_SERVERS")
    if not database_url or not kafka:
        pytest.fail(SERVICES_HOW_TO, pytrace=False)
    return Services(
        database_url,
        kafka,
        os.environ.get("TEST_KAFKA_STOP_CMD"),
        os.environ.get("TEST_KAFKA_START_CMD"),
        os.environ.get("TEST_PG_START_CMD"),
    )
