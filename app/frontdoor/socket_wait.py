"""How long a request's bytes waited on the socket before the server read them.

The event loop's lag (``tracing.loop_lag``) is an estimate of that wait: the largest lag of the
last quarter second. In a burst it is wrong both ways: 16-90 ms, while connections waited 0-340
ms in the kernel, queued behind the requests the loop read before them.

The kernel keeps the time each TCP connection last received data: ``tcpi_last_data_recv`` of
``TCP_INFO``, in milliseconds since then, counted in jiffies (4 ms at ``HZ=250``). Read as a
request is parsed, it bounds that request's own wait to within a jiffy either way. ``waited_ms``
takes the loop's lag where it lies within those bounds, and the nearest bound where it does not:
at rest the lag's finer figure, in a burst the request's own. ``app.frontdoor.protocol`` records
it for every request it reads and times refusals from it. It times the connection's last
segment, so a request whose body came apart from its headers is timed from its body's arrival.

Linux TCP sockets only; elsewhere (another platform, a Unix socket) the loop's lag alone.
"""

from __future__ import annotations

import functools
import socket
import struct
import sys
import time
from typing import Any

#: Where ``tcpi_last_data_recv`` (u32, ms) lies in ``struct tcp_info`` (linux/tcp.h): after
#: eight one-byte fields and nine u32s, then ``tcpi_last_data_sent`` and ``tcpi_last_ack_sent``.
LAST_DATA_RECV_OFFSET = 52
TCP_INFO_BYTES = 104
#: The jiffy assumed where it cannot be measured (``HZ=100``, the coarsest common).
COARSEST_JIFFY_MS = 10.0


def last_data_ms(sock: Any) -> float | None:
    """Milliseconds since ``sock`` last received data, by the kernel's clock (None: not known
    for this socket)."""
    if not sys.platform.startswith("linux") or sock is None:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_BYTES)
    except (OSError, AttributeError):
        return None
    if len(info) < LAST_DATA_RECV_OFFSET + 4:
        return None
    return float(struct.unpack_from("I", info, LAST_DATA_RECV_OFFSET)[0])


@functools.cache
def jiffy_ms() -> float:
    """The kernel clock's step behind ``last_data_ms``: measured once over a loopback
    connection, as the first figure above 0 after data arrives, and never more than
    ``COARSEST_JIFFY_MS`` (no kernel ticks slower; a busy machine that wakes the poll late reads
    more: 12 ms was seen with two test suites on 2 cores)."""
    try:
        with (
            socket.create_server(("127.0.0.1", 0)) as server,
            socket.create_connection(server.getsockname()) as client,
        ):
            peer, _ = server.accept()
            with peer:
                client.sendall(b"x")
                peer.recv(1)
                deadline = time.perf_counter() + 0.1
                while time.perf_counter() < deadline:
                    last = last_data_ms(peer)
                    if last is None:
                        break
                    if last > 0:
                        return min(last, COARSEST_JIFFY_MS)
                    time.sleep(0.0005)
    except OSError:
        pass
    return COARSEST_JIFFY_MS


def waited_ms(sock: Any, lag_ms: float) -> float:
    """How long the data just read from ``sock`` waited there: ``lag_ms`` (the loop's recent
    lag) within the kernel's bounds for this connection, else the nearest bound."""
    last = last_data_ms(sock)
    if last is None:
        return lag_ms
    jiffy = jiffy_ms()
    return min(max(lag_ms, last - jiffy, 0.0), last + jiffy)
