"""The package graph holds, and importing a package loads only what it needs.

``app`` imports ``retrieval``, ``inference`` and ``tracing``, which import none of ``app``,
``bench``, ``tests`` or each other. ``bench`` (the load harness, behind the ``[bench]`` extra)
stands apart: only ``ragtime bench`` (``app/cli.py``) reaches it, and nothing in the library
imports ``tests``. Import costs are checked in fresh interpreters, where ``sys.modules`` is clean.
"""

from __future__ import annotations

import ast
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
EXCEPTIONS = {("app/cli.py", "bench")}


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


def loaded_after(statement: str, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` a fresh interpreter holds after running ``statement``."""
    code = f"import sys; {statement}; print(' '.join(m for m in {modules!r} if m in sys.modules))"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return result.stdout.split()


def test_bench_stats_loads_neither_faiss_nor_the_pipeline() -> None:
    heavy = ("faiss", "app", "app.pipeline", "torch", "fastapi")
    assert loaded_after("import bench.stats", heavy) == []


def test_importing_app_stays_light() -> None:
    heavy = ("faiss", "torch", "fastapi", "app.main", "app.pipeline", "bench")
    assert loaded_after("import app", heavy) == []


def test_the_floor_holds_the_bare_stack_only() -> None:
    assert loaded_after("import bench.floor", ("app", "faiss", "torch")) == []
