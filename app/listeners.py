"""How ``ragtime serve``'s processes listen: each on a socket of its own, the kernel spreading
new connections across them (``SO_REUSEPORT``), instead of all on one socket.

On one shared socket, every process waits for connections and whichever wakes first accepts
all that are pending. A burst then lands on one process: 97 of 100 connections went to one of
two processes in the first burst of a fresh server (BENCHMARKS.md, "Connections spread across
the processes"). Admission is decided per process, so that process refused work the other,
idle, could have done. With a socket of its own per process, Linux hashes each connection to
one of the listening sockets, so each process gets about its share.

The supervisor keeps a bound socket that does not listen (``reserve``): it holds the address
against other programs, so a port in use fails at start with a clear error, and it takes no
connections itself. Each worker binds its own socket there (``worker_socket``) and listens on
it only once its app has started (``app.frontdoor.server.GracefulServer.startup``): a socket
that listened while its worker loaded its models took its share of connections, which waited
there for seconds while ``/readyz``, answered by a sibling, said ready. A connection waiting in
a worker's queue when that worker dies is reset, where one shared socket would have let another
process take it; uvicorn's supervisor starts a new worker.

A worker serves its socket through a thread that reads requests ahead of its event loop and
decides their admission there (``listen``, ``app.read_ahead``), where its app's gate decides
(``app.early_admission``); else on the loop, as uvicorn would.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import sys

import uvicorn

from app import held_sockets
from app.early_admission import GATE_KEY, AdmittingProtocol, Gate
from app.read_ahead import ReadAhead


def supported() -> bool:
    """Whether this platform spreads connections across ``SO_REUSEPORT`` sockets (Linux)."""
    return sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


def _bound(config: uvicorn.Config) -> socket.socket:
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((config.host, config.port))
    except OSError:
        sock.close()
        raise
    return sock


def reserve(config: uvicorn.Config) -> socket.socket:
    """The supervisor's hold on ``config``'s address: bound, not listening. A server already
    listening there (another ``ragtime serve``, whose sockets would share the port with ours)
    is refused as a port in use."""
    host = "127.0.0.1" if config.host in ("", "0.0.0.0") else config.host
    host = "::1" if host == "::" else host
    try:
        socket.create_connection((host, config.port), timeout=0.5).close()
    except OSError:
        return _bound(config)
    raise OSError(errno.EADDRINUSE, f"a server already listens on {config.host}:{config.port}")


def worker_socket(config: uvicorn.Config) -> socket.socket:
    """A worker's own socket on ``config``'s address: bound, not listening yet. Until it
    listens, the kernel hands its connections to the sockets that do (the workers that have
    started), or refuses them when none does."""
    return _bound(config)


async def listen(server: uvicorn.Server, listener: socket.socket) -> ReadAhead | None:
    """Serve ``listener`` for ``server`` (its app started): through a thread reading ahead of
    the event loop where the app's gate decides and the platform has its calls (that thread,
    started), else on the loop as uvicorn's ``startup`` would (``None``)."""
    config = server.config

    def protocol() -> asyncio.Protocol:
        """The server's HTTP protocol for one connection, as uvicorn's ``startup`` makes it."""
        made: asyncio.Protocol = config.http_protocol_class(  # type: ignore[call-arg]
            config=config, server_state=server.server_state, app_state=server.lifespan.state
        )
        return made

    gate = server.lifespan.state.get(GATE_KEY)
    if not (
        isinstance(gate, Gate)
        and gate.decides
        and issubclass(config.http_protocol_class, AdmittingProtocol)
        and held_sockets.available()
    ):
        loop_server = await asyncio.get_running_loop().create_server(
            protocol, sock=listener, backlog=config.backlog
        )
        server.servers.append(loop_server)
        return None
    reader = ReadAhead(
        listener,
        gate=gate,
        loop=asyncio.get_running_loop(),
        protocol=protocol,
        default_headers=lambda: server.server_state.default_headers,
        keep_alive_s=config.timeout_keep_alive,
    )
    reader.start()
    return reader
