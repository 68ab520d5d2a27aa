"""Several ``ragtime serve`` processes each listen on a socket of their own, and the kernel
spreads connections across them (``app.frontdoor.listeners``); the supervisor's reserved address
takes none, and a port some server already listens on is refused."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncIterator

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from app.frontdoor import listeners
from app.frontdoor.server import GracefulServer
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
    with (
        listeners.reserve(cfg),
        listeners.worker_socket(cfg) as a,
        listeners.worker_socket(cfg) as b,
    ):
        a.listen(64)
        b.listen(64)
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
        listeners.worker_socket(config(port)) as worker,
        pytest.raises(OSError, match="already listens"),
    ):
        worker.listen(8)  # a worker that has started
        listeners.reserve(config(port))


@pytest.mark.parametrize("read_ahead", [True, False], ids=["read-ahead", "on-the-loop"])
def test_a_worker_takes_no_connection_until_its_app_has_started(read_ahead: bool) -> None:
    """A worker whose app is still starting (loading its models) does not listen: a connection
    goes to a sibling that has started, or is refused, never queued where nothing serves it."""
    started = threading.Event()
    release = threading.Event()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        started.set()
        while not release.is_set():  # a model loading
            await asyncio.sleep(0.01)
        yield

    app = Starlette(routes=[Route("/", lambda request: PlainTextResponse("up"))], lifespan=lifespan)
    cfg = uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning")
    server = GracefulServer(cfg, read_ahead=read_ahead)
    with listeners.reserve(cfg), listeners.worker_socket(cfg) as sock:
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        try:
            assert started.wait(30)
            with pytest.raises(ConnectionRefusedError):  # starting: nobody listens yet
                socket.create_connection(("127.0.0.1", cfg.port), timeout=5).close()
            release.set()
            assert server.serving.wait(30), "the server did not start"
            with socket.create_connection(("127.0.0.1", cfg.port), timeout=5) as client:
                client.sendall(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
                assert client.recv(1024).startswith(b"HTTP/1.1 200")
        finally:
            release.set()
            server.should_exit = True
            thread.join(timeout=15)
