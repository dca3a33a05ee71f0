"""Remove the files of disabled options and print the next steps. No network I/O.

Which files go is a declarative table, so adding an option means adding a row.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

# (option, value that disables it) -> paths to remove, relative to the project root.
REMOVE_WHEN: dict[tuple[str, object], tuple[str, ...]] = {
    ("include_example_domain", False): (
        "src/{package_name}/domain",
        "src/{package_name}/api/orders.py",
        "tests/integration/test_orders.py",
        "tests/integration/test_payments.py",
        "tests/integration/test_example_faults.py",
        "tests/integration/test_example_strict.py",
        "docs/example-domain.md",
    ),
    ("opentelemetry", False): (
        "src/{package_name}/telemetry",
        "tests/integration/test_tracing.py",
        "tests/integration/test_otlp_logs.py",
        "tests/unit/test_dashboards.py",
        "tests/unit/test_telemetry_observer.py",
        "deploy/otel",
    ),
    ("ci", "github"): (".gitlab-ci.yml",),
    ("ci", "gitlab"): (".github",),
    ("ci", "none"): (".github", ".gitlab-ci.yml"),
}


def paths_to_remove(context: dict[str, Any]) -> list[str]:
    paths: list[str] = []
    for (option, value), templates in REMOVE_WHEN.items():
        if context.get(option) == value and type(context.get(option)) is type(value):
            paths.extend(t.format(**context) for t in templates)
    return paths


def remove_paths(root: Path, paths: list[str]) -> list[str]:
    removed = []
    for relative in paths:
        target = root / relative
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
        else:
            continue
        removed.append(relative)
    return removed


def next_steps(context: dict[str, Any]) -> str:
    slug = context["project_slug"]
    lines = [
        f"Generated {context['project_name']} in ./{slug}",
        "",
        "Next steps:",
        f"  cd {slug}",
        "  uv lock                           # pin the dependencies once, and commit uv.lock:",
        "                                    # the image, CI and uv sync --locked install it",
        "  docker compose up                 # postgres, kafka, migrate, api, worker, consumer",
        "",
        "Without Docker (README.md has the whole path):",
        "  uv sync --locked --extra dev",
        "  export DATABASE_URL=postgresql+asyncpg://... KAFKA_BOOTSTRAP_SERVERS=host:9092",
        f"  uv run {slug} migrate && uv run {slug} api",
        "",
        f"Edit your transports in src/{context['package_name']}/transports/ and boxes in config/boxes.yaml.",
    ]
    return "\n".join(lines)


def main(context: dict[str, Any], root: Path) -> int:
    remove_paths(root, paths_to_remove(context))
    print(next_steps(context))
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(r"""{{ cookiecutter | jsonify }}"""), Path.cwd()))
