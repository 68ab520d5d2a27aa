"""The package graph holds, and importing a package loads only what it needs.

``app`` imports ``retrieval``, ``inference`` and ``tracing``, which import none of ``app``,
``bench``, ``tests`` or each other. ``bench`` (the load harness, behind the ``[bench]`` extra)
stands apart: only ``ragtime bench`` (``app/cli/commands.py``) reaches it, and nothing in the
library imports ``tests``. Import costs are checked in fresh interpreters, where ``sys.modules`` is
clean. Within ``tests/``, no module imports a test module or a conftest: shared builders live in
``tests/helpers/``, test doubles in ``tests/fakes/``, and fixtures reach tests through conftest.
No module of the five packages is over ``MAX_MODULE_LINES`` lines.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("app", "retrieval", "inference", "tracing", "bench")

#: Which of our packages each package may import.
ALLOWED = {
    "app": {"app", "retrieval", "inference", "tracing"},
    "retrieval": {"retrieval"},
    "inference": {"inference"},
    "tracing": {"tracing"},
    "bench": {"bench", "app", "retrieval", "inference", "tracing"},
}
#: The one door from the service to the harness: the ``ragtime bench`` subcommand.
EXCEPTIONS = {("app/cli/commands.py", "bench")}


def imported_packages(path: Path) -> set[str]:
    """The top-level names that a module imports, at any depth of its code."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_follow_the_package_graph(package: str) -> None:
    ours = {*PACKAGES, "tests"}
    wrong = []
    for path in sorted((ROOT / package).rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        for name in sorted(imported_packages(path) & ours - ALLOWED[package]):
            if (relative, name) not in EXCEPTIONS:
                wrong.append(f"{relative} imports {name}")
    assert not wrong, wrong


def test_the_bench_runs_without_tests() -> None:
    """The bench ships in the wheel and ``tests/`` does not: no bench module may start a test
    module or a double of ``tests/`` either, in a subprocess or by a pytest run (the imports
    above would not see a module named in a string)."""
    named = re.compile(r"\btests\.(fakes|helpers)\b|-m\s+tests\b|\bpytest\b")
    wrong = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in sorted((ROOT / "bench").rglob("*.py"))
        for match in named.finditer(path.read_text())
    ]
    assert not wrong, wrong


def imported_modules(source: str, package: str) -> set[str]:
    """The dotted names of the modules that ``source``, a module of ``package``, imports
    (``from a import b`` names ``a.b`` too, since ``b`` may be a module)."""
    parts = package.split(".")
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = parts[: len(parts) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def module_graph() -> dict[str, set[str]]:
    """Each module of our packages and the modules of ours it imports, at any depth of its code
    (a lazy import inside a function still makes an edge: it only hides a cycle)."""
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        graph[name] = {m for m in imported_modules(path.read_text(), package) if m in modules}
        graph[name].discard(name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_back() -> None:
    """No import cycle among our modules, not even one a lazy import would hide. A package's
    ``__init__`` that re-exports its modules is an edge like any other."""
    graph = module_graph()
    for package in PACKAGES:  # a package re-exporting its modules is not a cycle of theirs
        for module in graph:
            if module.startswith(package + "."):
                graph[module].discard(package)
    assert cycles(graph) == []


def test_the_cycle_check_finds_a_hidden_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


#: The app's layers below HTTP: none of them may import ``app.http`` (issue 57 §2). Errors carry
#: what the boundary answers with (a status and a type), and ``app/http/errors.py`` maps them.
BELOW_HTTP = (
    "app.pipeline",
    "app.stages",
    "app.keys",
    "app.safety",
    "app.settings",
    "app.frontdoor",
)


def arrows_up(graph: dict[str, set[str]]) -> list[str]:
    """The imports from a layer below HTTP into ``app.http``."""
    return sorted(
        f"{module} -> {imported}"
        for module, imports in graph.items()
        if module.startswith(BELOW_HTTP)
        for imported in imports
        if imported == "app.http" or imported.startswith("app.http.")
    )


def test_nothing_below_the_http_layer_imports_it() -> None:
    assert arrows_up(module_graph()) == []


def test_the_check_sees_an_arrow_up() -> None:
    graph = {"app.keys.ratelimit": {"app.http.errors"}, "app.http.deps": {"app.keys.auth"}}
    assert arrows_up(graph) == ["app.keys.ratelimit -> app.http.errors"]


def is_test_module(name: str) -> bool:
    """Whether ``name`` is a module that pytest collects or loads itself: ``test_*``, conftest."""
    last = name.rsplit(".", 1)[-1]
    return last.startswith("test_") or last == "conftest"


def test_no_test_module_imports_another() -> None:
    wrong = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        relative = path.relative_to(ROOT)
        package = ".".join(relative.parent.parts)
        for name in sorted(filter(is_test_module, imported_modules(path.read_text(), package))):
            wrong.append(f"{relative.as_posix()} imports {name}")
    assert not wrong, wrong


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("from tests.app.conftest import running_app", "tests.app.conftest"),
        ("from tests.bench import test_results", "tests.bench.test_results"),
        ("import tests.inference.test_prompt_packing", "tests.inference.test_prompt_packing"),
        ("from .conftest import Doc", "tests.inference.conftest"),
        ("from . import test_routing", "tests.inference.test_routing"),
        ("from ..app.conftest import make_settings", "tests.app.conftest"),
    ],
)
def test_the_check_sees_each_form_of_import(statement: str, expected: str) -> None:
    found = set(filter(is_test_module, imported_modules(statement, "tests.inference")))
    assert found == {expected}


def test_helpers_and_fakes_are_not_test_modules() -> None:
    names = ["tests.helpers.app", "tests.fakes.backends", "pytest", "tests.helpers.testing_x"]
    assert not any(map(is_test_module, names))


def loaded_after(statement: str, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` a fresh interpreter holds after running ``statement``."""
    code = f"import sys; {statement}; print(' '.join(m for m in {modules!r} if m in sys.modules))"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return result.stdout.split()


def test_bench_stats_loads_neither_faiss_nor_the_pipeline() -> None:
    heavy = ("faiss", "app", "app.pipeline", "torch", "fastapi")
    assert loaded_after("import bench.harness.stats", heavy) == []


def test_importing_app_stays_light() -> None:
    heavy = ("faiss", "torch", "fastapi", "app.main", "app.pipeline", "bench")
    assert loaded_after("import app", heavy) == []


def test_the_default_serve_path_loads_no_read_ahead() -> None:
    """The read-ahead plug-in is opt-in: the app, its HTTP protocol and ``ragtime serve``'s
    server import none of it (the server imports it only when it is on)."""
    statement = "import app.main, app.frontdoor.protocol, app.frontdoor.run"
    assert loaded_after(statement, ("app.frontdoor.read_ahead",)) == []


def test_the_floor_holds_the_bare_stack_only() -> None:
    assert loaded_after("import bench.harness.floor", ("app", "faiss", "torch")) == []


#: The most lines a module of ours may have (issue 42 §3): one a newcomer reads in one sitting.
MAX_MODULE_LINES = 400


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_is_over_400_lines(package: str) -> None:
    long = {
        path.relative_to(ROOT).as_posix(): lines
        for path in sorted((ROOT / package).rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"split by meaning: {long}"
