"""How ``ragtime serve``'s processes listen: each on a socket of its own, the kernel spreading
new connections across them (``SO_REUSEPORT``), instead of all on one socket.

On one shared socket, every process waits for connections and whichever wakes first accepts
all that are pending. A burst then lands on one process: 97 of 100 connections went to one of
two processes in the first burst of a fresh server (docs/studies/front-door.md, "Connections spread
across the processes"). Admission is decided per process, so that process refused work the other,
idle, could have done. With a socket of its own per process, Linux hashes each connection to one of
the listening sockets, so each process gets about its share.

The supervisor keeps a bound socket that does not listen (``reserve``): it holds the address
against other programs, so a port in use fails at start with a clear error, and it takes no
connections itself. Each worker binds its own socket there (``worker_socket``) and listens on
it only once its app has started (``app.frontdoor.server.GracefulServer.startup``): a socket
that listened while its worker loaded its models took its share of connections, which waited
there for seconds while ``/readyz``, answered by a sibling, said ready. A connection waiting in
a worker's queue when that worker dies is reset, where one shared socket would have let another
process take it; the supervisor starts a new worker (``app.frontdoor.workers``).

A worker serves its socket on its event loop, as uvicorn would, or, where the read-ahead
plug-in is on, through its thread (``app.frontdoor.read_ahead``).
"""

from __future__ import annotations

import errno
import socket
import sys

import uvicorn


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
