"""Unit tests of hooks/pre_gen_project.py (validation) and hooks/post_gen_project.py
(removal of the files of disabled options), imported from their paths."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from combos import SUPPORTED
from conftest import resolve_context


@pytest.fixture(scope="module")
def defaults() -> dict[str, Any]:
    return resolve_context({})


# --------------------------------------------------------------------------------------
# pre_gen_project.validate


def test_defaults_are_valid(pre_gen: ModuleType, defaults: dict[str, Any]) -> None:
    assert pre_gen.validate(defaults) == []


@pytest.mark.parametrize("combo", SUPPORTED, ids=lambda c: c.id)
def test_supported_combinations_are_valid(pre_gen: ModuleType, combo: Any) -> None:
    assert pre_gen.validate(resolve_context(combo.answers)) == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("project_slug", "a"),
        ("project_slug", "order-service-2"),
        ("package_name", "order_service_2"),
        ("bucket_count", "1"),
        ("bucket_count", "4096"),
        ("bucket_count", 16),
        ("outbox_item", "a" * 31),
        ("inbox_item", "refund_v2"),
        ("python_version", "3.11"),
        ("python_version", "3.13"),
        ("include_example_domain", False),
        ("opentelemetry", False),
        ("partition_strategy", "hash"),
        ("ci", "none"),
    ],
)
def test_edge_values_are_accepted(
    pre_gen: ModuleType, defaults: dict[str, Any], name: str, value: object
) -> None:
    assert pre_gen.validate({**defaults, name: value}) == []


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("project_slug", "Order Service", "project_slug 'Order Service' is not valid"),
        ("project_slug", "Order-Service", "project_slug 'Order-Service' is not valid"),
        ("project_slug", "order--service", "project_slug 'order--service' is not valid"),
        ("project_slug", "order-service-", "project_slug 'order-service-' is not valid"),
        ("project_slug", "1order", "project_slug '1order' is not valid"),
        ("project_slug", "order_service", "project_slug 'order_service' is not valid"),
        ("project_slug", "", "project_slug '' is not valid"),
        ("package_name", "json", "package_name 'json' would shadow the module"),
        ("package_name", "asyncio", "package_name 'asyncio' would shadow the module"),
        ("package_name", "sqlalchemy", "package_name 'sqlalchemy' would shadow the module"),
        ("package_name", "tests", "package_name 'tests' would shadow the module"),
        ("package_name", "class", "package_name 'class' is not a valid Python package name"),
        ("package_name", "Order", "package_name 'Order' is not a valid Python package name"),
        ("package_name", "order-service", "package_name 'order-service' is not a valid Python"),
        ("package_name", "_order", "package_name '_order' is not a valid Python package name"),
        ("python_version", "3.10", "python_version '3.10' is not supported"),
        ("python_version", "3.14", "python_version '3.14' is not supported"),
        ("partition_strategy", "random", "partition_strategy 'random' is not one of number, hash"),
        ("ci", "jenkins", "ci 'jenkins' is not one of github, gitlab, none"),
        (
            "include_example_domain",
            "yes",
            "include_example_domain must be true or false, got 'yes'",
        ),
        ("include_example_domain", 1, "include_example_domain must be true or false, got 1"),
        ("opentelemetry", "False", "opentelemetry must be true or false, got 'False'"),
        ("opentelemetry", None, "opentelemetry must be true or false, got None"),
        ("bucket_count", "0", "bucket_count '0' must be a whole number from 1 to 4096"),
        ("bucket_count", "abc", "bucket_count 'abc' must be a whole number from 1 to 4096"),
        ("bucket_count", "5000", "bucket_count '5000' must be a whole number from 1 to 4096"),
        ("bucket_count", "4097", "bucket_count '4097' must be a whole number from 1 to 4096"),
        ("bucket_count", "-1", "bucket_count '-1' must be a whole number from 1 to 4096"),
        ("bucket_count", "1.5", "bucket_count '1.5' must be a whole number from 1 to 4096"),
        ("bucket_count", "", "bucket_count '' must be a whole number from 1 to 4096"),
        ("outbox_item", "Order", "outbox_item 'Order' is not valid"),
        ("outbox_item", "2fa", "outbox_item '2fa' is not valid"),
        ("outbox_item", "order-item", "outbox_item 'order-item' is not valid"),
        ("outbox_item", "a" * 32, f"outbox_item '{'a' * 32}' is not valid"),
        ("inbox_item", "import", "inbox_item 'import' is not valid"),
        ("inbox_item", "", "inbox_item '' is not valid"),
    ],
)
def test_each_bad_answer_gets_its_own_message(
    pre_gen: ModuleType, defaults: dict[str, Any], name: str, value: object, message: str
) -> None:
    problems = pre_gen.validate({**defaults, name: value})
    assert len(problems) == 1, problems
    assert message in problems[0]


def test_all_problems_are_reported_at_once(pre_gen: ModuleType, defaults: dict[str, Any]) -> None:
    problems = pre_gen.validate(
        {**defaults, "project_slug": "Bad Slug", "bucket_count": "0", "inbox_item": "X"}
    )
    assert len(problems) == 3
    assert [p.split()[0] for p in problems] == ["project_slug", "bucket_count", "inbox_item"]


def test_main_prints_problems_and_fails(
    pre_gen: ModuleType, defaults: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert pre_gen.main({**defaults, "bucket_count": "0"}) == 1
    err = capsys.readouterr().err
    assert "Cannot generate the project" in err
    assert "bucket_count '0'" in err


def test_main_accepts_defaults_silently(
    pre_gen: ModuleType, defaults: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert pre_gen.main(defaults) == 0
    assert capsys.readouterr().err == ""


# --------------------------------------------------------------------------------------
# post_gen_project.paths_to_remove / remove_paths

DOMAIN = ("src/{p}/domain", "src/{p}/api/orders.py", "tests/integration/test_orders.py")
TELEMETRY = ("src/{p}/telemetry", "tests/integration/test_tracing.py")


@pytest.mark.parametrize(
    ("answers", "removed", "kept"),
    [
        pytest.param({}, (".gitlab-ci.yml",), (".github", *DOMAIN, *TELEMETRY), id="defaults"),
        pytest.param({"ci": "gitlab"}, (".github",), (".gitlab-ci.yml",), id="ci-gitlab"),
        pytest.param({"ci": "none"}, (".github", ".gitlab-ci.yml"), (), id="ci-none"),
        pytest.param({"include_example_domain": False}, DOMAIN, TELEMETRY, id="no-example-domain"),
        pytest.param({"opentelemetry": False}, TELEMETRY, DOMAIN, id="no-opentelemetry"),
        pytest.param(
            {
                "project_name": "Billing Hub",
                "include_example_domain": False,
                "opentelemetry": False,
            },
            (*DOMAIN, *TELEMETRY),
            (),
            id="custom-package-name",
        ),
    ],
)
def test_paths_to_remove(
    post_gen: ModuleType, answers: dict[str, Any], removed: tuple[str, ...], kept: tuple[str, ...]
) -> None:
    context = resolve_context(answers)
    package = context["package_name"]
    paths = set(post_gen.paths_to_remove(context))
    assert {p.format(p=package) for p in removed} <= paths
    assert not {p.format(p=package) for p in kept} & paths
    assert all(package in p for p in paths if p.startswith("src/")), paths


@pytest.mark.parametrize("value", ["false", "False", 0, None])
def test_only_real_booleans_disable_an_option(
    post_gen: ModuleType, defaults: dict[str, Any], value: object
) -> None:
    """A string "false" must not silently delete the example domain (pre_gen rejects it)."""
    context = {**defaults, "include_example_domain": value, "opentelemetry": value}
    assert post_gen.paths_to_remove(context) == post_gen.paths_to_remove(defaults)


@pytest.mark.parametrize(
    ("existing", "to_remove", "removed", "left"),
    [
        pytest.param(["a.txt", "b.txt"], ["a.txt"], ["a.txt"], ["b.txt"], id="file"),
        pytest.param(
            ["d/x.py", "d/sub/y.py", "keep.py"], ["d"], ["d"], ["keep.py"], id="directory-tree"
        ),
        pytest.param(["a.txt"], ["missing.txt", "a.txt"], ["a.txt"], [], id="missing-is-skipped"),
        pytest.param(["a.txt"], [], [], ["a.txt"], id="nothing"),
        pytest.param(
            [".github/workflows/ci.yml", ".gitlab-ci.yml", "README.md"],
            [".github", ".gitlab-ci.yml"],
            [".github", ".gitlab-ci.yml"],
            ["README.md"],
            id="ci-files",
        ),
    ],
)
def test_remove_paths(
    post_gen: ModuleType,
    tmp_path: Path,
    existing: list[str],
    to_remove: list[str],
    removed: list[str],
    left: list[str],
) -> None:
    for relative in existing:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("x")
    assert post_gen.remove_paths(tmp_path, to_remove) == removed
    remaining = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert remaining == sorted(left)


def test_main_removes_and_prints_next_steps(
    post_gen: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    context = resolve_context({"ci": "none"})
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    (tmp_path / "README.md").write_text("x")
    assert post_gen.main(context, tmp_path) == 0
    assert not (tmp_path / ".github").exists()
    assert (tmp_path / "README.md").exists()
    out = capsys.readouterr().out
    assert f"cd {context['project_slug']}" in out
    assert f"{context['project_slug']} migrate" in out
