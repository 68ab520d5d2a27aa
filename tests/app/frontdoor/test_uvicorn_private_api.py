"""uvicorn's private API is used in one module only (``app.frontdoor.protocol``), and each private
name that module relies on is still there in the installed uvicorn: an upgrade that renames one
fails here, by name, instead of in a burst in production (issue 42 §1). So does each public but
undocumented attribute of uvicorn's server, config and lifespan that the front door uses, and
sse-starlette's patch of ``uvicorn.Server.handle_exit`` (issue 57 §4)."""

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


# uvicorn's undocumented attributes without an underscore (issue 57 §4): its ``Server``,
# ``Config`` and lifespan hold state that the front door reads and sets, which no documentation
# promises. Each one used is listed here with what for; an upgrade that drops one fails by name,
# and a new use fails until it is listed.
USED_UVICORN_ATTRIBUTES = {
    "backlog": "Config.backlog: the listening socket's queue (server.py, read_ahead/serving.py)",
    "bind_socket": "Config.bind_socket(): the socket a single process serves (run.py, server.py)",
    "configure_logging": "Config.configure_logging(): a worker process's logging (workers.py)",
    "default_headers": "ServerState.default_headers: Server and Date headers (protocol.py)",
    "fd": "Config.fd: a socket handed down by file descriptor (server.py, reader.py)",
    "host": "Config.host (run.py)",
    "http_protocol_class": "Config.http_protocol_class: the protocol read-ahead builds",
    "is_ssl": "Config.is_ssl (server.py)",
    "lifespan": "Server.lifespan.state: the app's state, where the gate is (read_ahead/serving.py)",
    "port": "Config.port (listeners.py, run.py)",
    "run": "Server.run (run.py, workers.py)",
    "send": "ASGI's send, also a name of uvicorn's cycle (middleware.py, reader.py, shutdown.py)",
    "server_state": "Server.server_state: connections and tasks (read_ahead/serving.py)",
    "servers": "Server.servers: the asyncio servers a shutdown closes (read_ahead/serving.py)",
    "should_exit": "sse-starlette's AppStatus.should_exit, a name uvicorn's Server has too",
    "started": "Server.started: whether start-up finished (run.py, workers.py)",
    "state": "LifespanOn.state (read_ahead/serving.py)",
    "timeout_keep_alive": "Config.timeout_keep_alive (read_ahead/serving.py)",
    "uds": "Config.uds: a Unix socket path (server.py)",
    "workers": "Config.workers (run.py)",
}
UVICORN_STATE = ("server.py", "config.py", "lifespan/on.py", "protocols/utils.py")


def uvicorn_public_names() -> set[str]:
    """Every public name that uvicorn's server, config and lifespan assign or define."""
    names: set[str] = set()
    for part in UVICORN_STATE:
        source = (Path(uvicorn.__file__).parent / part).read_text()
        names |= set(re.findall(r"(?:self\.|def )([a-z][a-z0-9_]*)", source))
    return names


def frontdoor_uses_of(names: set[str]) -> set[str]:
    """The attributes of ``names`` the front door reads or sets, less those a module defines
    itself (the CLI only hands uvicorn.run its documented options)."""
    used = set()
    for path in sorted((ROOT / "app/frontdoor").rglob("*.py")):
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in names
                and not re.search(
                    rf"(self\.{node.attr}\s*[:=]|def {node.attr}\(|^\s+{node.attr}\s*[:=])",
                    source,
                    re.M,
                )
            ):
                used.add(node.attr)
    return used


@pytest.mark.parametrize("name", sorted(USED_UVICORN_ATTRIBUTES))
def test_each_uvicorn_attribute_the_front_door_uses_is_in_this_uvicorn(name: str) -> None:
    if name == "should_exit":  # sse-starlette's, checked below
        return
    assert name in uvicorn_public_names(), (
        f"uvicorn {uvicorn.__version__} no longer has {name}: {USED_UVICORN_ATTRIBUTES[name]}"
    )


def test_every_uvicorn_attribute_the_front_door_uses_is_listed() -> None:
    assert frontdoor_uses_of(uvicorn_public_names()) <= set(USED_UVICORN_ATTRIBUTES)


def test_sse_starlettes_patch_of_uvicorns_exit_is_as_the_shutdown_expects() -> None:
    """sse-starlette replaces ``uvicorn.Server.handle_exit`` when it is imported, to set its
    ``AppStatus.should_exit`` (which ends its streams) before uvicorn's own handler runs. The
    front door's server overrides ``handle_exit`` itself and calls the patched one only before
    its app has started; ``Shutdown.begin`` sets ``AppStatus.should_exit``. An upgrade of
    either package that changes this fails here."""
    from sse_starlette.sse import AppStatus

    from app.frontdoor.server import GracefulServer

    assert uvicorn.Server.handle_exit is AppStatus.handle_exit
    assert AppStatus.original_handler is not None
    assert AppStatus.original_handler.__qualname__ == "Server.handle_exit"
    assert isinstance(AppStatus.should_exit, bool)
    assert GracefulServer.handle_exit is not uvicorn.Server.handle_exit
