"""Bake every supported option combination and check the result: no leftover Jinja, the
files of disabled options gone and those of enabled ones present, configuration files that
parse, and a project that passes its own ruff and mypy. Unsupported answers must stop in the
pre-generation hook before anything is written."""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from cookiecutter.exceptions import FailedHookException

from combos import SUPPORTED, UNSUPPORTED, Combo, Unsupported
from conftest import TEMPLATE_DIR, TOOL_DIRS, Baked, Bakery, bake, run

pytestmark = pytest.mark.bake

COMBO_IDS = [combo.id for combo in SUPPORTED]
COOKIECUTTER_JSON = json.loads((TEMPLATE_DIR.parent / "cookiecutter.json").read_text())
CONTEXT_KEYS = [k for k in COOKIECUTTER_JSON if not k.startswith("_")]
# Files cookiecutter copies without rendering (the scaffold templates `generate` renders):
# Jinja in them is on purpose.
VERBATIM = tuple(COOKIECUTTER_JSON["_copy_without_render"])
SCAFFOLD = TEMPLATE_DIR / "src" / "{{cookiecutter.package_name}}" / "scaffold"

# Jinja the template left unrendered. Rendered files may legitimately contain other
# templating that survives on purpose (GitHub Actions `${{ }}`, Prometheus `{{ $labels.x }}`,
# Grafana `{{box}}`), so only Jinja's own statements and comments and references to the
# cookiecutter context count.
JINJA_STATEMENTS = [
    "if",
    "elif",
    "else",
    "endif",
    "for",
    "endfor",
    "set",
    "endset",
    "raw",
    "endraw",
    "macro",
    "endmacro",
    "call",
    "endcall",
    "include",
    "import",
    "from",
    "block",
    "endblock",
    "extends",
    "with",
    "endwith",
    "filter",
    "endfilter",
]
LEFTOVER_JINJA = re.compile(
    r"\{%-?\s*(?:" + "|".join(JINJA_STATEMENTS) + r")\b"
    r"|\{#.*?#\}"
    r"|\{\{-?\s*cookiecutter\b"
    r"|\bcookiecutter\.(?:" + "|".join(CONTEXT_KEYS) + r")\b"
)
JINJA_IN_NAME = re.compile(r"\{\{|\{%|\{#")


@pytest.fixture(params=SUPPORTED, ids=COMBO_IDS)
def baked(request: pytest.FixtureRequest, bakery: Bakery) -> Baked:
    combo: Combo = request.param
    return bakery.bake(combo)


def project_files(root: Path) -> list[Path]:
    """Files the template generated (not those of the venv, caches or tools)."""
    found = []
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if any(part in TOOL_DIRS or part.endswith(".egg-info") for part in relative.parts):
            continue
        if path.is_file():
            found.append(path)
    return sorted(found)


def read_text(path: Path) -> str | None:
    """The file's text, or None for a binary file."""
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


class _AnyTagLoader(yaml.SafeLoader):
    """safe_load that accepts custom tags (GitLab's !reference and the like) as plain data."""


def _construct_any(loader: yaml.SafeLoader, _suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node)
    return loader.construct_scalar(node)  # type: ignore[arg-type]


_AnyTagLoader.add_multi_constructor("!", _construct_any)


# --------------------------------------------------------------------------------------
# What the bake contains.


def verbatim(relative: Path, package: str) -> bool:
    """Whether cookiecutter copied this baked file without rendering it."""
    source = str(relative).replace(f"src/{package}/", "src/{{cookiecutter.package_name}}/", 1)
    return any(fnmatch.fnmatch(source, pattern) for pattern in VERBATIM)


def test_no_leftover_jinja(baked: Baked) -> None:
    problems = []
    for path in project_files(baked.root):
        relative = path.relative_to(baked.root)
        if JINJA_IN_NAME.search(str(relative)):
            problems.append(f"{relative}: Jinja in the file name")
        if verbatim(relative, baked.package):
            continue
        text = read_text(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if LEFTOVER_JINJA.search(line):
                problems.append(f"{relative}:{number}: {line.strip()[:120]}")
    assert not problems, "leftover Jinja:\n" + "\n".join(problems)


def test_files_follow_the_options(baked: Baked, post_gen: ModuleType) -> None:
    """Per post_gen's table: the files of disabled options are gone; those of enabled options
    are there (when the template has them)."""
    context = baked.context
    removed = set(post_gen.paths_to_remove(context))
    every = {
        template.format(**context)
        for templates in post_gen.REMOVE_WHEN.values()
        for template in templates
    }
    still_there = sorted(p for p in removed if (baked.root / p).exists())
    assert not still_there, f"files of disabled options were not removed: {still_there}"
    source_names = {**context, "package_name": "{{cookiecutter.package_name}}"}
    missing = []
    for relative in sorted(every - removed):
        in_template = {
            template.format(**source_names)
            for templates in post_gen.REMOVE_WHEN.values()
            for template in templates
            if template.format(**context) == relative
        }
        if (
            any((TEMPLATE_DIR / t).exists() for t in in_template)
            and not (baked.root / relative).exists()
        ):
            missing.append(relative)
    assert not missing, f"files of enabled options are missing: {missing}"


def test_no_patch_leftovers(baked: Baked) -> None:
    leftovers = [
        str(p.relative_to(baked.root))
        for p in project_files(baked.root)
        if p.suffix in {".rej", ".orig", ".bak", ".swp"} or p.name.endswith("~")
    ]
    assert not leftovers, f"stray files in the generated project: {leftovers}"


def test_yaml_files_parse(baked: Baked) -> None:
    files = [p for p in project_files(baked.root) if p.suffix in {".yml", ".yaml"}]
    assert files, "expected at least config/boxes.yaml"
    for path in files:
        try:
            list(yaml.load_all(path.read_text(), Loader=_AnyTagLoader))
        except yaml.YAMLError as exc:
            pytest.fail(f"{path.relative_to(baked.root)} is not valid YAML: {exc}", pytrace=False)


def test_toml_files_parse(baked: Baked) -> None:
    for path in project_files(baked.root):
        if path.suffix == ".toml":
            try:
                tomllib.loads(path.read_text())
            except tomllib.TOMLDecodeError as exc:
                pytest.fail(f"{path.relative_to(baked.root)}: {exc}", pytrace=False)


def test_project_metadata(baked: Baked) -> None:
    pyproject = tomllib.loads((baked.root / "pyproject.toml").read_text())
    project = pyproject["project"]
    assert project["name"] == baked.slug
    assert project["scripts"] == {baked.slug: f"{baked.package}.cli:main"}
    assert (baked.root / ".python-version").read_text().strip() == baked.context["python_version"]
    assert f">={baked.context['python_version']}" in project["requires-python"]
    assert (baked.root / "src" / baked.package / "__init__.py").is_file()


def test_names_follow_the_answers(baked: Baked) -> None:
    transports = baked.root / "src" / baked.package / "transports"
    outbox = f"{baked.context['outbox_item']}_outbox_item"
    inbox = f"{baked.context['inbox_item']}_inbox_item"
    assert (transports / f"{outbox}.py").is_file()
    assert (transports / f"{inbox}.py").is_file()
    boxes = yaml.safe_load((baked.root / "config" / "boxes.yaml").read_text())
    assert list(boxes["outbox"]) == [outbox]
    assert list(boxes["inbox"]) == [inbox]
    for box in (boxes["outbox"][outbox], boxes["inbox"][inbox]):
        assert box["bucket_count"] == int(baked.context["bucket_count"])
        assert box["partition_strategy"] == baked.context["partition_strategy"]


def test_scaffold_is_copied_verbatim(baked: Baked) -> None:
    """The scaffold templates reach the bake byte for byte, and only they are left unrendered."""
    scaffold = baked.root / "src" / baked.package / "scaffold"
    expected = {p.name: p.read_bytes() for p in SCAFFOLD.iterdir() if p.is_file()}
    assert len(expected) >= 6, sorted(expected)
    assert {p.name: p.read_bytes() for p in scaffold.iterdir() if p.is_file()} == expected
    unrendered = [
        str(p.relative_to(baked.root))
        for p in project_files(baked.root)
        if verbatim(p.relative_to(baked.root), baked.package)
    ]
    assert sorted(unrendered) == sorted(f"src/{baked.package}/scaffold/{name}" for name in expected)


# The baked project's `generate` renders, for its own first boxes, what the template wrote.
RENDER_FIRST_BOXES = """
import json, sys
from {package}.ops.generate import ProjectFiles, item_class, item_transport
project = ProjectFiles.find(sys.argv[1])
print(json.dumps({{
    kind: {{"transport": item_transport(project, name, kind), "item": item_class(project, name, kind)}}
    for kind, name in (("outbox", sys.argv[2]), ("inbox", sys.argv[3]))
}}))
"""


@pytest.mark.parametrize("combo", SUPPORTED, ids=COMBO_IDS)
def test_first_boxes_come_from_the_scaffold(bakery: Bakery, combo: Combo) -> None:
    """One source: the bake's transport modules and item classes are what `generate item`
    renders for the same names, byte for byte (the example domain's own inbox handler and
    event types excepted: the scaffold's defaults are replaced there)."""
    installed = bakery.install(combo)
    context = installed.baked.context
    package, outbox, inbox = context["package_name"], context["outbox_item"], context["inbox_item"]
    rendered = json.loads(
        subprocess.run(
            [
                installed.bin("python"),
                "-c",
                RENDER_FIRST_BOXES.format(package=package),
                installed.root,
                outbox,
                inbox,
            ],
            env=installed.env(),
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
    )
    transports = installed.root / "src" / package / "transports"
    items = (installed.root / "src" / package / "items.py").read_text()
    cls, source = rendered["outbox"]["transport"]
    assert (transports / f"{outbox}_outbox_item.py").read_text() == source
    assert (
        f"{package}.transports.{outbox}_outbox_item:{cls}"
        in (installed.root / "config" / "boxes.yaml").read_text()
    )
    if context["include_example_domain"]:
        assert (
            "class PaymentReceivedHandler(EventHandler[PaymentReceived])"
            in (transports / f"{inbox}_inbox_item.py").read_text()
        )
        return
    cls, source = rendered["inbox"]["transport"]
    assert (transports / f"{inbox}_inbox_item.py").read_text() == source
    assert items.endswith(
        "\n\n\n" + rendered["outbox"]["item"] + "\n\n" + rendered["inbox"]["item"]
    )


# --------------------------------------------------------------------------------------
# The baked project's own linters, in its own venv.


@pytest.mark.parametrize("combo", SUPPORTED, ids=COMBO_IDS)
def test_ruff_check(bakery: Bakery, combo: Combo) -> None:
    installed = bakery.install(combo)
    run(
        [installed.bin("ruff"), "check", "--no-cache", "."], cwd=installed.root, env=installed.env()
    )


@pytest.mark.parametrize("combo", SUPPORTED, ids=COMBO_IDS)
def test_ruff_format(bakery: Bakery, combo: Combo) -> None:
    installed = bakery.install(combo)
    run(
        [installed.bin("ruff"), "format", "--check", "--no-cache", "."],
        cwd=installed.root,
        env=installed.env(),
    )


@pytest.mark.parametrize("combo", SUPPORTED, ids=COMBO_IDS)
def test_mypy(bakery: Bakery, combo: Combo) -> None:
    installed = bakery.install(combo)
    run([installed.bin("mypy")], cwd=installed.root, env=installed.env(), timeout=900)


# --------------------------------------------------------------------------------------
# Answers the template refuses.


@pytest.mark.parametrize("case", UNSUPPORTED, ids=[case.id for case in UNSUPPORTED])
def test_unsupported_answers_stop_in_pre_gen(
    case: Unsupported, tmp_path: Path, cookiecutter_config: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "out"
    with pytest.raises(FailedHookException):
        bake(case.answers, output, cookiecutter_config)
    err = capfd.readouterr().err
    assert case.message in err, err
    assert list(output.iterdir()) == [], "the project directory was left behind"


def test_unlisted_choice_is_refused_before_generation(
    tmp_path: Path, cookiecutter_config: Path
) -> None:
    """A python_version outside cookiecutter.json's choices never reaches the hooks."""
    output = tmp_path / "out"
    with pytest.raises(ValueError, match=r"3\.10"):
        bake({"python_version": "3.10"}, output, cookiecutter_config)
    assert not output.exists() or list(output.iterdir()) == []
