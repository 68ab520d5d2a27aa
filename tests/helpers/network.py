"""A guard that keeps tests off the network: connections beyond loopback raise and are recorded.

``tests/conftest.py`` installs it around every test (``socket.socket.connect`` and
``connect_ex`` patched), so that a test which would reach a model hub, a collector or any other
host fails, even where a client turns the error into one of its own. Loopback (127.0.0.0/8,
``::1``, ``localhost``) and Unix sockets pass: servers under test listen on 127.0.0.1. A test
marked ``network`` runs unguarded.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any


class NetworkBlocked(RuntimeError):
    """A test tried to connect beyond loopback."""


def is_loopback(address: Any) -> bool:
    """Whether a ``connect`` address stays on this machine (non-IP families always do)."""
    if not isinstance(address, tuple):
        return True  # AF_UNIX paths, and the like
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


class NetworkGuard:
    """Wraps ``socket.socket``'s connect methods; ``attempts`` lists what it blocked."""

    def __init__(self) -> None:
        self.attempts: list[str] = []

    def wrap(self, connect: Callable[..., Any]) -> Callable[..., Any]:
        def guarded(sock: socket.socket, address: Any) -> Any:
            if sock.family in (socket.AF_INET, socket.AF_INET6) and not is_loopback(address):
                where = f"{address[0]}:{address[1]}"
                self.attempts.append(where)
                raise NetworkBlocked(f"tests may connect to loopback only, not {where}")
            return connect(sock, address)

        return guarded
