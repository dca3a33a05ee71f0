"""Environments: the baked project and the peers, each in its own Python 3.12 venv."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DRIVERS = Path(__file__).resolve().parent / "drivers"

# The peers exactly as installed from the package index (versions land in the results).
PEERS: dict[str, list[str]] = {
    "faststream-outbox": ["faststream-outbox[asyncpg]", "faststream[confluent]"],
    "omni-box": ["omni-box[postgres,kafka]"],
}


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def uv() -> str:
    return os.environ["BENCH_UV"]


def python312() -> str:
    return os.environ["BENCH_PYTHON_3_12"]


def cache_dir() -> Path:
    return Path(os.environ.get("BENCH_CACHE_DIR", Path.home() / ".cache" / "outbox-service-bench"))


def _run(args: list[str], cwd: Path | None = None) -> str:
    result = subprocess.run(
        args,
        cwd=cwd or cache_dir(),
        capture_output=True,
        text=True,
        env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
        check=False,
    )
    if result.returncode:
        raise RuntimeError(f"{' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def make_venv(path: Path, requirements: list[str]) -> Path:
    """A venv with Python 3.12 and `requirements` (kept in the cache; upgraded each run)."""
    python = path / "bin" / "python"
    if not python.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        _run([uv(), "venv", "--quiet", "--python", python312(), str(path)])
    _run([uv(), "pip", "install", "--quiet", "--python", str(python), *requirements])
    return python


def versions(python: Path, packages: list[str]) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json, sys\n"
        "print(json.dumps({p: m.version(p) for p in sys.argv[1:]}))"
    )
    import json

    out = _run([str(python), "-c", code, *packages])
    parsed: dict[str, str] = json.loads(out)
    return parsed


@dataclass(frozen=True)
class Project:
    root: Path
    python: Path
    slug: str
    package: str
    outbox_box: str
    inbox_box: str
    outbox_topic_env: str
    inbox_topic_env: str

    @property
    def script(self) -> Path:
        return self.python.parent / self.slug


def bake_project(workdir: Path) -> Project:
    """Bake the template with its defaults into `workdir` and install it (no dev extras)."""
    from cookiecutter.generate import generate_context
    from cookiecutter.main import cookiecutter
    from cookiecutter.prompt import prompt_for_config

    config = workdir / "cookiecutter-config.yaml"
    workdir.mkdir(parents=True, exist_ok=True)
    config.write_text(
        f"cookiecutters_dir: {workdir / 'cookiecutters'}\nreplay_dir: {workdir / 'replay'}\n"
    )
    context: dict[str, Any] = prompt_for_config(
        generate_context(context_file=str(ROOT / "cookiecutter.json")), no_input=True
    )
    root = Path(
        cookiecutter(str(ROOT), no_input=True, output_dir=str(workdir), config_file=str(config))
    )
    venv = root / ".venv"
    _run([uv(), "venv", "--quiet", "--python", python312(), str(venv)], cwd=workdir)
    _run(
        [
            uv(),
            "pip",
            "install",
            "--quiet",
            "--python",
            str(venv / "bin" / "python"),
            "-e",
            str(root),
        ],
        cwd=workdir,
    )
    outbox, inbox = str(context["outbox_item"]), str(context["inbox_item"])
    return Project(
        root=root,
        python=venv / "bin" / "python",
        slug=str(context["project_slug"]),
        package=str(context["package_name"]),
        outbox_box=f"{outbox}_outbox_item",
        inbox_box=f"{inbox}_inbox_item",
        outbox_topic_env=f"{outbox.upper()}_EVENTS_TOPIC",
        inbox_topic_env=f"{inbox.upper()}_EVENTS_TOPIC",
    )
