"""Free ports on 127.0.0.1, for servers that tests start in their own processes."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port that was free a moment ago (bound, read, released: another process may take it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
