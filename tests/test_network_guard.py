"""The guard of ``tests/conftest.py``: connections beyond loopback fail the test; loopback works."""

from __future__ import annotations

import socket

import pytest

from tests.helpers.network import NetworkBlocked, NetworkGuard, is_loopback


def test_a_connection_beyond_loopback_is_blocked(no_network: NetworkGuard) -> None:
    with (
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock,
        pytest.raises(NetworkBlocked, match=r"192\.0\.2\.1:9"),
    ):
        sock.connect(("192.0.2.1", 9))  # TEST-NET-1: never routed
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock, pytest.raises(NetworkBlocked):
        sock.connect_ex(("2001:db8::1", 9, 0, 0))
    assert no_network.attempts == ["192.0.2.1:9", "2001:db8::1:9"]
    no_network.attempts.clear()  # the guard's teardown would fail this test otherwise


def test_loopback_connects() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        with socket.create_connection(("localhost", port), timeout=5):
            pass


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        (("127.0.0.1", 80), True),
        (("127.5.6.7", 80), True),
        (("::1", 80, 0, 0), True),
        (("::ffff:127.0.0.1", 80, 0, 0), True),
        (("localhost", 80), True),
        ("/tmp/some.sock", True),
        (("10.0.0.1", 80), False),
        (("0.0.0.0", 80), False),
        (("example.org", 80), False),
    ],
)
def test_what_counts_as_loopback(address: object, loopback: bool) -> None:
    assert is_loopback(address) is loopback


@pytest.mark.network
def test_a_network_test_runs_unguarded(no_network: NetworkGuard | None) -> None:
    assert no_network is None
