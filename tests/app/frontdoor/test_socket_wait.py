"""How long a request's bytes waited on the socket (``app.frontdoor.socket_wait``): the kernel's
figure for the connection bounds the loop's lag, within a jiffy either way."""

from __future__ import annotations

import socket
import struct
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from app.frontdoor import socket_wait

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="TCP_INFO as on Linux")


class TcpInfo:
    """A socket whose ``TCP_INFO`` says its data last arrived ``last_ms`` ago."""

    def __init__(self, last_ms: int) -> None:
        self.last_ms = last_ms

    def getsockopt(self, level: int, option: int, size: int) -> bytes:
        assert (level, option) == (socket.IPPROTO_TCP, socket.TCP_INFO)
        head = bytes(socket_wait.LAST_DATA_RECV_OFFSET)
        return (head + struct.pack("I", self.last_ms)).ljust(size, b"\0")


@contextmanager
def connection() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A loopback TCP connection: the client's end and the server's."""
    with (
        socket.create_server(("127.0.0.1", 0)) as server,
        socket.create_connection(server.getsockname()) as client,
    ):
        peer, _ = server.accept()
        with peer:
            yield client, peer


@linux
def test_the_loops_lag_stands_within_the_kernels_bounds() -> None:
    jiffy = socket_wait.jiffy_ms()
    assert 1.0 <= jiffy <= 10.0
    # At rest: the kernel says under a jiffy ago, the loop's finer 0.5 ms stands.
    assert socket_wait.waited_ms(TcpInfo(0), lag_ms=0.5) == 0.5
    # In a burst the lag is the worst of the last quarter second; this request's bytes
    # arrived 8 ms ago, so it waited at most a jiffy more than that.
    assert socket_wait.waited_ms(TcpInfo(8), lag_ms=50.0) == 8 + jiffy
    # A wait the lag did not see (the connection queued unaccepted): the kernel's lower bound.
    assert socket_wait.waited_ms(TcpInfo(40), lag_ms=2.0) == 40 - jiffy


def test_without_the_kernels_figure_the_loops_lag_stands() -> None:
    left, right = socket.socketpair()  # a Unix socket: no TCP_INFO
    with left, right:
        assert socket_wait.waited_ms(right, lag_ms=7.0) == 7.0
    assert socket_wait.waited_ms(None, lag_ms=3.0) == 3.0


@linux
def test_a_wait_on_a_real_socket_is_seen_by_the_kernel() -> None:
    with connection() as (client, peer):
        client.sendall(b"question")
        time.sleep(0.03)  # the bytes wait at least 30 ms before they are read
        assert peer.recv(64) == b"question"
        jiffy = socket_wait.jiffy_ms()
        assert socket_wait.waited_ms(peer, lag_ms=0.0) >= 30.0 - 2 * jiffy
        assert socket_wait.waited_ms(peer, lag_ms=10_000.0) < 10_000.0
