"""Socket calls that keep the interpreter's lock (``app.frontdoor.read_ahead.held_sockets``), used
by the thread that reads requests ahead of the event loop: what each call returns, and that none
lets another thread run."""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.frontdoor import socket_wait
from app.frontdoor.read_ahead import held_sockets
from app.frontdoor.read_ahead.held_sockets import HeldSocket

pytestmark = pytest.mark.skipif(not held_sockets.available(), reason="Linux calls")


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        sock.setblocking(False)
        yield sock


def _accepted(listener: socket.socket) -> HeldSocket:
    for _ in range(1000):
        if (held := held_sockets.accept(listener)) is not None:
            return held
        time.sleep(0.01)
    raise AssertionError("no connection accepted")


@contextlib.contextmanager
def _connected(listener: socket.socket) -> Iterator[tuple[socket.socket, HeldSocket]]:
    """A client connected to ``listener``, and its connection as accepted there."""
    with socket.create_connection(listener.getsockname()[:2]) as client:
        held = _accepted(listener)
        try:
            yield client, held
        finally:
            held.close()


def _received(held: HeldSocket, size: int) -> bytes:
    got, deadline = b"", time.monotonic() + 10
    while len(got) < size and time.monotonic() < deadline:
        got += held.recv() or b""
    return got


def test_accept_gives_the_peer_and_none_when_nobody_waits(listener: socket.socket) -> None:
    assert held_sockets.accept(listener) is None
    with _connected(listener) as (client, held):
        assert held.peer == client.getsockname()
        assert held_sockets.accept(listener) is None


def test_accept_on_ipv6_gives_the_peer() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        server = socket.create_server(("::1", 0), family=socket.AF_INET6)
    except OSError:
        pytest.skip("no IPv6 loopback")
    with server:
        server.setblocking(False)
        with _connected(server) as (client, held):
            assert held.peer == client.getsockname()[:2]


def test_recv_and_send_return_at_once(listener: socket.socket) -> None:
    with _connected(listener) as (client, held):
        assert held.recv() is None  # nothing yet
        client.sendall(b"GET / HTTP/1.1\r\n\r\n")
        assert _received(held, 18) == b"GET / HTTP/1.1\r\n\r\n"
        assert held.send(b"HTTP/1.1 503 x\r\n\r\n") == 18
        assert client.recv(100) == b"HTTP/1.1 503 x\r\n\r\n"
        assert socket_wait.last_data_ms(held) is not None  # TCP_INFO, by descriptor
        client.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + 10
        while (data := held.recv()) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert data == b""  # the peer closed


def test_recv_reads_at_most_what_is_asked_and_leaves_the_rest(listener: socket.socket) -> None:
    with _connected(listener) as (client, held):
        client.sendall(b"abcdef")
        deadline = time.monotonic() + 10
        while (first := held.recv(2)) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert first == b"ab"
        assert _received(held, 4) == b"cdef"


def _stamping(listener: socket.socket) -> None:
    """``listener``'s connections stamped as their segments arrive. The kernel turns stamping
    on a moment after it is first asked (a deferred switch), so wait for a stamped read."""
    if not held_sockets.stamp_arrivals(listener):
        pytest.skip("this machine's number for SO_TIMESTAMPNS is not known here")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with _connected(listener) as (client, held):
            client.sendall(b"x")
            assert select.select([held.fd], [], [], 10)[0]
            data, arrived = held.recv_stamped()
            assert data == b"x"
            if arrived is not None:
                return
        time.sleep(0.05)
    raise AssertionError("the kernel stamped no segment in 10 s")


def test_a_stamped_read_says_when_its_bytes_arrived_not_when_they_were_read(
    listener: socket.socket,
) -> None:
    _stamping(listener)
    with _connected(listener) as (client, held):
        assert held.recv_stamped() == (None, None)  # nothing yet
        sent = time.time_ns()
        client.sendall(b"GET / HTTP/1.1\r\n\r\n")
        assert select.select([held.fd], [], [], 10)[0]
        readable = time.time_ns()
        time.sleep(0.05)  # read well after the bytes arrived
        data, arrived = held.recv_stamped()
        client.shutdown(socket.SHUT_WR)
        assert select.select([held.fd], [], [], 10)[0]
        closed, _ = held.recv_stamped()
    assert data == b"GET / HTTP/1.1\r\n\r\n"
    assert arrived is not None and sent <= arrived <= readable
    assert closed == b""


def test_a_unix_listener_is_not_stamped(tmp_path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as unix:
        unix.bind(str(tmp_path / "sock"))
        assert held_sockets.stamp_arrivals(unix) is False


def test_a_read_without_stamps_asked_for_has_none(listener: socket.socket) -> None:
    with _connected(listener) as (client, held):
        client.sendall(b"abc")
        assert select.select([held.fd], [], [], 10)[0]
        assert held.recv_stamped() == (b"abc", None)


def test_the_arrival_is_found_among_the_control_messages() -> None:
    word = struct.calcsize("@N")
    header = -(-struct.calcsize("@Nii") // word) * word

    def message(level: int, kind: int, payload: bytes) -> bytes:
        raw = struct.pack("@Nii", header + len(payload), level, kind).ljust(header, b"\0")
        padded = -(-(header + len(payload)) // word) * word
        return (raw + payload).ljust(padded, b"\0")

    stamp = struct.pack("@ll", 1_796_000_000, 123_456_789)
    other = message(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("@i", 7))
    ours = message(socket.SOL_SOCKET, held_sockets._SO_TIMESTAMPNS or 35, stamp)
    if held_sockets._SO_TIMESTAMPNS is None:
        pytest.skip("this machine's number for SO_TIMESTAMPNS is not known here")
    assert held_sockets._arrival_ns(other + ours) == 1_796_000_000_123_456_789
    assert held_sockets._arrival_ns(other) is None
    assert held_sockets._arrival_ns(b"") is None
    assert held_sockets._arrival_ns(struct.pack("@Nii", 1, 1, 35)) is None  # a length too short


def test_send_all_gives_up_on_a_client_that_does_not_read(listener: socket.socket) -> None:
    with _connected(listener) as (client, held):
        with pytest.raises(TimeoutError):
            held.send_all(b"x" * (64 << 20), timeout_s=0.2)
        assert client.recv(10)  # what fitted was sent


def test_a_closed_socket_says_so(listener: socket.socket) -> None:
    with socket.create_connection(listener.getsockname()):
        held = _accepted(listener)
        fd = held.fd
        held.close()
        held.close()  # a second close does nothing
        assert held.fd == -1
        with pytest.raises(OSError):
            HeldSocket(fd).recv()


def test_the_poller_says_which_descriptors_are_ready(listener: socket.socket) -> None:
    poller = held_sockets.Poller()
    try:
        poller.register(listener.fileno())
        assert poller.wait(0) == [] and poller.wait_held(0) == []
        with socket.create_connection(listener.getsockname()) as client:
            assert poller.wait(10) == [listener.fileno()]
            assert poller.wait_held(0) == [listener.fileno()]  # keeping the lock
            held = _accepted(listener)
            try:
                poller.register(held.fd)
                client.sendall(b"x")
                assert poller.wait(10) == [held.fd]
                assert poller.wait_held(1) == [held.fd]
                poller.unregister(held.fd)
                poller.unregister(held.fd)  # not watched: let be
                assert poller.wait(0) == []
            finally:
                held.close()
    finally:
        poller.close()


@contextlib.contextmanager
def _spinning() -> Iterator[list[int]]:
    """A thread counting as fast as it can while it holds the interpreter's lock."""
    count, stop = [0], threading.Event()

    def spin() -> None:
        while not stop.is_set():
            count[0] += 1

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    try:
        yield count
    finally:
        stop.set()
        thread.join(timeout=30)


def test_no_call_lets_another_thread_run(listener: socket.socket) -> None:
    """With a switch interval of 2 s, a thread waiting for the lock takes it only when its
    holder lets go: a socket call that let go would let the spinning thread count (and take
    2 s to get the lock back)."""
    interval = sys.getswitchinterval()
    poller = held_sockets.Poller()
    with socket.create_connection(listener.getsockname()) as client:
        held = _accepted(listener)
        try:
            with _spinning() as count:
                sys.setswitchinterval(2.0)
                time.sleep(0.01)  # lets go: the spinner runs until this thread's wait forces it
                before = count[0]
                for _ in range(3):
                    assert held_sockets.accept(listener) is None
                    assert held.recv() is None
                    held.send(b"x")
                    poller.register(held.fd)
                    assert poller.wait_held(0) == []
                    assert poller.wait_held(1) == []
                    poller.unregister(held.fd)
                after = count[0]
        finally:
            sys.setswitchinterval(interval)
            held.close()
            poller.close()
        assert client.recv(1000)
    assert after == before
