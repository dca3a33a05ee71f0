"""Validate the answers before anything is generated.

Importable (the template's tests call `validate` directly); when cookiecutter runs it, the
rendered context below is checked and any problem stops generation with exit code 1.
"""

from __future__ import annotations

import json
import keyword
import re
import sys
from typing import Any

SLUG = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
PACKAGE = re.compile(r"^[a-z][a-z0-9_]*$")
ITEM = re.compile(r"^[a-z][a-z0-9_]{0,30}$")
SUPPORTED_PYTHON = ("3.11", "3.12", "3.13")
CHOICES = {"partition_strategy": ("number", "hash"), "ci": ("github", "gitlab", "none")}
BOOLEANS = ("include_example_domain", "opentelemetry")
# Package names that would shadow the standard library or a dependency of the service.
SHADOWED = frozenset(
    set(sys.stdlib_module_names)
    | {
        "alembic",
        "asyncpg",
        "confluent_kafka",
        "dependency_injector",
        "fastapi",
        "httpx",
        "opentelemetry",
        "pydantic",
        "pydantic_settings",
        "pytest",
        "sqlalchemy",
        "starlette",
        "testcontainers",
        "uvicorn",
        "yaml",
        "tests",
        "migrations",
        "src",
    }
)


def validate(context: dict[str, Any]) -> list[str]:
    """Every problem with the answers, as sentences a user can act on."""
    problems: list[str] = []
    slug = str(context.get("project_slug", ""))
    package = str(context.get("package_name", ""))
    if not SLUG.match(slug):
        problems.append(
            f"project_slug {slug!r} is not valid: use lowercase letters, digits and single hyphens, "
            "starting with a letter (e.g. 'order-service')"
        )
    if not PACKAGE.match(package) or keyword.iskeyword(package):
        problems.append(
            f"package_name {package!r} is not a valid Python package name: use lowercase letters, "
            "digits and underscores, starting with a letter"
        )
    elif package in SHADOWED:
        problems.append(
            f"package_name {package!r} would shadow the module of the same name; choose another"
        )
    version = str(context.get("python_version", ""))
    if version not in SUPPORTED_PYTHON:
        problems.append(
            f"python_version {version!r} is not supported: choose one of {', '.join(SUPPORTED_PYTHON)}"
        )
    for name, allowed in CHOICES.items():
        value = context.get(name)
        if value not in allowed:
            problems.append(f"{name} {value!r} is not one of {', '.join(allowed)}")
    for name in BOOLEANS:
        if not isinstance(context.get(name), bool):
            problems.append(f"{name} must be true or false, got {context.get(name)!r}")
    raw_buckets = str(context.get("bucket_count", ""))
    if not raw_buckets.isdigit() or not 1 <= int(raw_buckets) <= 4096:
        problems.append(f"bucket_count {raw_buckets!r} must be a whole number from 1 to 4096")
    for name in ("outbox_item", "inbox_item"):
        value = str(context.get(name, ""))
        if not ITEM.match(value) or keyword.iskeyword(value):
            problems.append(
                f"{name} {value!r} is not valid: use lowercase letters, digits and underscores, "
                "starting with a letter, at most 31 characters"
            )
    return problems


def main(context: dict[str, Any]) -> int:
    problems = validate(context)
    if problems:
        print("Cannot generate the project:", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(r"""{{ cookiecutter | jsonify }}""")))
