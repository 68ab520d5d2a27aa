"""uvicorn's private API is used in one module only (``app.frontdoor.protocol``), and each private
name that module relies on is still there in the installed uvicorn: an upgrade that renames one
fails here, by name, instead of in a burst in production (issue 42 §1)."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest
import uvicorn
from uvicorn.protocols.http import httptools_impl

ROOT = Path(__file__).resolve().parents[3]
PROTOCOL = "app/frontdoor/protocol.py"
#: uvicorn's modules anyone may import: the package's face (``uvicorn.Config``, ``Server``).
PUBLIC = {"uvicorn"}


def our_modules() -> list[Path]:
    return sorted(
        path
        for package in ("app", "retrieval", "inference", "tracing", "bench")
        for path in (ROOT / package).rglob("*.py")
    )


def uvicorn_modules_imported(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "uvicorn"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {node.module} if node.module.split(".")[0] == "uvicorn" else set()
    return found


def uvicorn_private_names() -> set[str]:
    """Every ``_name`` that uvicorn's source assigns or defines as an attribute or method."""
    names: set[str] = set()
    for path in Path(uvicorn.__file__).parent.rglob("*.py"):
        names |= set(re.findall(r"(?:self\.|def )(_[a-z][a-z0-9_]*)", path.read_text()))
    return names


def test_only_the_protocol_imports_uvicorns_internal_modules() -> None:
    wrong = []
    for path in our_modules():
        relative = path.relative_to(ROOT).as_posix()
        for module in uvicorn_modules_imported(ast.parse(path.read_text())):
            if module in PUBLIC or relative == PROTOCOL:
                continue
            wrong.append(f"{relative} imports {module}")
    assert not wrong, wrong


def test_only_the_protocol_touches_uvicorns_private_attributes() -> None:
    private = uvicorn_private_names()
    wrong = []
    for path in our_modules():
        relative = path.relative_to(ROOT).as_posix()
        if relative == PROTOCOL:
            continue
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            # A name of our own that uvicorn happens to use too is fine where the module
            # defines it itself.
            if (
                isinstance(node, ast.Attribute)
                and node.attr in private
                and not re.search(rf"(self\.{node.attr}\s*[:=]|def {node.attr}\()", source)
            ):
                wrong.append(f"{relative}:{node.lineno} .{node.attr}")
    assert not wrong, wrong


def named_in_the_protocols_docstring() -> list[str]:
    """The private names ``app.frontdoor.protocol``'s docstring says it relies on."""
    doc = ast.get_docstring(ast.parse((ROOT / PROTOCOL).read_text())) or ""
    listed = doc[doc.index("uvicorn's private names used here") :]
    return re.findall(r"``([A-Za-z_][A-Za-z0-9_.]*)``", listed)


@pytest.mark.parametrize("name", named_in_the_protocols_docstring())
def test_each_private_name_the_protocol_relies_on_is_in_this_uvicorn(name: str) -> None:
    if name.startswith("uvicorn."):
        module, _, attribute = name.rpartition(".")
        assert hasattr(__import__(module, fromlist=[attribute]), attribute), name
        return
    if name in ("HttpToolsProtocol", "RequestResponseCycle"):
        assert inspect.isclass(getattr(httptools_impl, name)), name
        return
    if name.startswith("tests/"):
        return
    source = inspect.getsource(httptools_impl)
    assert re.search(rf"(def |self\.|\.){re.escape(name)}\b", source), (
        f"uvicorn {uvicorn.__version__} no longer has {name}, which app/frontdoor/protocol.py "
        "relies on"
    )


def test_the_docstring_names_every_private_name_the_protocol_uses() -> None:
    """What the protocol reaches of uvicorn's classes beyond the ASGI interface is listed."""
    listed = set(named_in_the_protocols_docstring())
    tree = ast.parse((ROOT / PROTOCOL).read_text())
    private = uvicorn_private_names()
    used = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in private
    }
    assert used <= listed, sorted(used - listed)
