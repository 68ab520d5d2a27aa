"""Several ``ragtime serve`` processes each listen on a socket of their own, and the kernel
spreads connections across them (``app.listeners``); the supervisor's reserved address takes
none, and a port some server already listens on is refused."""

from __future__ import annotations

import socket

import pytest
import uvicorn

from app import listeners
from tests.helpers.ports import free_port

pytestmark = pytest.mark.skipif(not listeners.supported(), reason="SO_REUSEPORT spreads on Linux")


def config(port: int) -> uvicorn.Config:
    return uvicorn.Config("app.main:create_app", host="127.0.0.1", port=port, workers=2)


def accepted(sock: socket.socket) -> int:
    """How many connections wait in ``sock``'s queue (accepted and closed here)."""
    sock.setblocking(False)
    count = 0
    while True:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


def test_connections_spread_across_the_workers_sockets() -> None:
    cfg = config(free_port())
    with listeners.reserve(cfg), listeners.listening(cfg) as a, listeners.listening(cfg) as b:
        clients = [socket.create_connection(("127.0.0.1", cfg.port)) for _ in range(64)]
        try:
            counts = [accepted(a), accepted(b)]
        finally:
            for client in clients:
                client.close()
    # Each connection is hashed to one listening socket: 64 all on one has odds of 2 ** -63.
    assert sum(counts) == 64 and min(counts) > 0, counts


def test_a_port_in_use_is_refused() -> None:
    port = free_port()
    with socket.socket() as plain:
        plain.bind(("127.0.0.1", port))  # bound without SO_REUSEPORT: nobody may share it
        with pytest.raises(OSError):
            listeners.reserve(config(port))
    # Another ragtime serve on the same port would share it: refused as in use.
    with (
        listeners.reserve(config(port)),
        listeners.listening(config(port)),
        pytest.raises(OSError, match="already listens"),
    ):
        listeners.reserve(config(port))
