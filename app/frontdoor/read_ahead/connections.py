"""A connection the read-ahead thread holds: what it has read and parsed of its next request,
when those bytes reached the kernel, and the request as an ASGI scope would hold it; and what
goes with it to the loop's HTTP protocol when the thread hands it over (``Prelude``, the
protocol's ``HandOver``)."""

from __future__ import annotations

import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import httptools

from app.frontdoor import socket_wait
from app.frontdoor.gate import stamp_arrival
from app.frontdoor.read_ahead.held_sockets import HeldSocket
from tracing.budget.door.ticket import Ticket


def waited_ms(sock: HeldSocket, arrived_ns: int | None) -> float:
    """How long the bytes just read from ``sock`` waited in the kernel: from the stamp of their
    arrival where there is one, else from the connection's ``TCP_INFO``, to a jiffy (4 ms). A
    stamp ahead of the clock (the wall clock stepped back) is not believed."""
    if arrived_ns is not None:
        waited_ns = time.time_ns() - arrived_ns
        if waited_ns >= 0:
            return waited_ns / 1e6
    return socket_wait.last_data_ms(sock) or 0.0


@dataclass(eq=False)
class Prelude:
    """What the thread read of a connection before the loop's protocol took it (the protocol's
    ``app.frontdoor.protocol.HandOver``): its bytes, and for the first request among them, when
    it was read and received, and its ticket where it was admitted here."""

    data: bytes
    read_at: float
    received_at: float
    ticket: Ticket | None = None
    stamped: bool = False
    """Whether the first request's arrival was stamped in its state (once)."""

    @property
    def admitted(self) -> bool:
        return self.ticket is not None

    def stamp_first_arrival(self, state: dict[str, Any]) -> bool:
        """Stamp the first request's arrival, as it was read here, once; ``False`` after."""
        if self.stamped:
            return False
        self.stamped = True
        stamp_arrival(state, self.read_at, self.read_at - self.received_at)
        return True

    def take_ticket(self) -> Ticket | None:
        """The ticket the first request was admitted with, once: whoever takes it serves the
        request or gives its place back."""
        ticket, self.ticket = self.ticket, None
        return ticket


class Request:
    """httptools' callbacks for one request read on a connection; ``begun`` counts requests."""

    def __init__(self) -> None:
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.body = bytearray()
        self.begun = 0
        self.head_read = False
        self.complete = False

    def on_message_begin(self) -> None:
        self.begun += 1

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.head_read = True

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        self.complete = True


@dataclass(eq=False)
class Connection:
    """A connection held by the thread: what it has read of its next request."""

    sock: HeldSocket
    request: Request = field(default_factory=Request)
    parser: Any = None
    data: bytearray = field(default_factory=bytearray)
    read_at: float = 0.0
    """When the request's first bytes were read (0: none yet)."""
    received_at: float = 0.0
    idle_since: float | None = None
    """Set after a response from here: the connection is closed after the keep-alive."""

    def __post_init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self.request)

    def reset(self, now: float) -> None:
        """Ready for the connection's next request, after a response."""
        self.request = Request()
        self.parser = httptools.HttpRequestParser(self.request)
        self.data = bytearray()
        self.read_at = self.received_at = 0.0
        self.idle_since = now

    def prelude(self, ticket: Ticket | None) -> Prelude:
        """What was read of the connection, for the protocol that takes it over, with the
        ticket its first request was admitted with here, if it was."""
        return Prelude(bytes(self.data), self.read_at, self.received_at, ticket)

    def scope(self) -> dict[str, Any] | None:
        """What the gate reads of the request, as an ASGI scope would hold it (``None``: one
        the gate never takes, as uvicorn would not start it without a reply first)."""
        request, parser = self.request, self.parser
        if any(name in (b"expect", b"upgrade") for name, _ in request.headers):
            return None
        url = httptools.parse_url(request.url)
        state: dict[str, Any] = {}
        stamp_arrival(state, self.read_at, self.read_at - self.received_at)
        return {
            "type": "http",
            "method": parser.get_method().decode("ascii"),
            "http_version": parser.get_http_version(),
            "path": urllib.parse.unquote(url.path.decode("ascii")),
            "raw_path": url.path,
            "query_string": url.query or b"",
            "root_path": "",
            "headers": request.headers,
            "client": self.sock.peer,
            "state": state,
        }
