"""The engine is a package of its own (`src/outbox_engine/` in every baked project).

What the split promises, checked on the template and on bakes:
- the same bytes in every option combination (so a template update replaces it whole, and a
  fix reaches every project alike);
- no Jinja, and no import of the service package (the dependency points one way: service ->
  engine), so it type-checks with `mypy --strict` copied out alone;
- no import cycle among its modules, and no module over MAX_LINES lines (one job each);
- a public API: `outbox_engine.__all__` resolves, engine modules never import the package
  root (which would make every module depend on all of them), and the code users own
  (items, transports, domain) imports only that API.
"""

from __future__ import annotations

import ast
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from combos import SUPPORTED
from conftest import TEMPLATE_DIR, Bakery, run

ENGINE = TEMPLATE_DIR / "src" / "outbox_engine"
SERVICE_TEMPLATE = TEMPLATE_DIR / "src" / "{{cookiecutter.package_name}}"
MAX_LINES = 300
# The code a user owns and edits: it imports the engine's public API only.
USER_OWNED = ("items.py", "transports", "domain")


def engine_modules(root: Path = ENGINE) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the engine under `root`."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _type_checking_block(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def module_level_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Imports that run when the module is imported (not inside functions nor under
    `if TYPE_CHECKING:`): the edges that can make a cycle."""
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If | ast.Try) and not _type_checking_block(node):
            pending.extend(node.body)
            pending.extend(node.orelse)
            if isinstance(node, ast.Try):
                for handler in node.handlers:
                    pending.extend(handler.body)


def all_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def imported_names(node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> list[str]:
    """The engine modules an import statement loads (its target, and for `from pkg import
    mod` the submodule)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    found = [base]
    found += [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in module_level_imports(ast.parse(path.read_text(), str(path))):
            for target in imported_names(node, modules):
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


# --------------------------------------------------------------------------------------
# On the template.


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_engine_has_no_jinja() -> None:
    offenders = [
        str(path.relative_to(ENGINE))
        for path in ENGINE.rglob("*")
        if path.is_file()
        and any(mark in path.read_text() for mark in ("{{", "{%", "{#", "cookiecutter"))
    ]
    assert offenders == []
    assert not any("{" in part for path in ENGINE.rglob("*") for part in path.parts[-1:])


def test_the_engine_imports_nothing_of_the_service_nor_its_own_root() -> None:
    modules = engine_modules()
    assert len(modules) >= 40, sorted(modules)
    offenders = []
    for name, path in modules.items():
        for node in all_imports(ast.parse(path.read_text(), str(path))):
            line = f"{name}:{node.lineno}: {ast.unparse(node)}"
            if isinstance(node, ast.ImportFrom) and node.level:
                offenders.append(f"{line} (relative: import outbox_engine.<module> instead)")
            targets = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
            )
            for target in targets:
                top = target.split(".")[0]
                if "cookiecutter" in target or top in {"order_service", "db", "container"}:
                    offenders.append(f"{line} (the service package)")
                if target == "outbox_engine" and name != "outbox_engine":
                    offenders.append(f"{line} (the package root: import the module)")
    assert offenders == []


def test_the_engine_has_no_import_cycle() -> None:
    graph = import_graph(engine_modules())
    assert sum(len(targets) for targets in graph.values()) > 50  # the graph was read
    assert cycles(graph) == []


def test_no_engine_module_is_long() -> None:
    lengths = {name: len(path.read_text().splitlines()) for name, path in engine_modules().items()}
    assert {name: n for name, n in lengths.items() if n > MAX_LINES} == {}


def test_user_owned_code_imports_only_the_public_api() -> None:
    files = [SERVICE_TEMPLATE / "items.py"]
    for folder in USER_OWNED[1:]:
        files += sorted((SERVICE_TEMPLATE / folder).rglob("*.py"))
    offenders = []
    for path in files:
        for line_number, line in enumerate(path.read_text().splitlines(), 1):
            stripped = line.strip()
            if stripped.startswith(("from outbox_engine.", "import outbox_engine.")):
                offenders.append(f"{path.relative_to(TEMPLATE_DIR)}:{line_number}: {stripped}")
    assert len(files) >= 4
    assert offenders == []


# --------------------------------------------------------------------------------------
# On bakes.


@pytest.mark.bake
def test_the_engine_is_identical_in_every_combination(bakery: Bakery) -> None:
    trees = {}
    for combo in SUPPORTED:
        root = bakery.bake(combo).root / "src" / "outbox_engine"
        trees[combo.id] = {
            str(path.relative_to(root)): path.read_bytes()
            for path in sorted(root.rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts
        }
    reference = trees[SUPPORTED[0].id]
    assert len(reference) == len(engine_modules())
    for combo_id, tree in trees.items():
        assert sorted(tree) == sorted(reference), combo_id
        assert [name for name in tree if tree[name] != reference[name]] == [], combo_id


@pytest.mark.bake
def test_the_public_api_resolves(bakery: Bakery) -> None:
    """Every name of `__all__` resolves, and importing the package loads none of the engine's
    heavy parts (they load on first use: a CLI process starts in the time it needs)."""
    installed = bakery.install(SUPPORTED[0])
    script = (
        "import sys\n"
        "import outbox_engine\n"
        "heavy = sorted(m for m in ('confluent_kafka', 'httpx', 'outbox_engine.relay.worker')"
        " if m in sys.modules)\n"
        "assert not heavy, f'importing the package loaded {heavy}'\n"
        "missing = [n for n in outbox_engine.__all__ if not hasattr(outbox_engine, n)]\n"
        "assert not missing, missing\n"
        "print(len(outbox_engine.__all__))\n"
    )
    result = run([installed.bin("python"), "-c", script], cwd=installed.root, env=installed.env())
    assert int(result.stdout.strip().splitlines()[-1]) >= 30


@pytest.mark.bake
def test_the_engine_type_checks_alone(bakery: Bakery, tmp_path: Path) -> None:
    """Copied out of the project, without the service package beside it, the engine passes
    mypy --strict: it needs nothing of the service, not even for its types."""
    installed = bakery.install(SUPPORTED[0])
    alone = tmp_path / "alone"
    shutil.copytree(installed.root / "src" / "outbox_engine", alone / "outbox_engine")
    (alone / "mypy.ini").write_text(
        "[mypy]\nstrict = true\nplugins = pydantic.mypy\n"
        "[mypy-confluent_kafka.*]\nignore_missing_imports = true\n"
    )
    result = run(
        [installed.bin("mypy"), "--config-file", "mypy.ini", "-p", "outbox_engine"],
        cwd=alone,
        env=installed.env(MYPYPATH=str(alone)),
        timeout=900,
    )
    assert "Success" in result.stdout
