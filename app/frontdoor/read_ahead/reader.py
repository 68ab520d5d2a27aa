"""Requests read ahead of the event loop, so that a refusal need not wait for it (issue 22 §1).

Deciding admission as a request is parsed (``app.frontdoor.protocol``) sends a refusal within a
millisecond of its read. But in a burst the read itself comes late: the event loop gets round to
a connection only between the steps of the work it already took on, and requests waited 0-340
ms in the kernel before it read them (docs/studies/front-door.md, "How long a burst's requests wait
before they are read"). A refusal's client waits all of that.

``ReadAhead`` is a thread of each ``ragtime serve`` process that owns its listening socket. It
accepts each connection, reads its first request and, where the gate takes it (a question with
a key and a small body: ``Gate.takes``), decides admission there:

- refused: the 503 (the same bytes as the protocol's) is written from this thread, counted and
  traced as the protocol's is. The connection stays here for its next request, and is closed
  after ``timeout_keep_alive`` idle, as uvicorn would;
- admitted, or not the gate's to decide: the socket and the bytes read go to the event loop,
  whose HTTP protocol (``AdmittingProtocol``, taking over a ``Prelude``: its ``HandOver``)
  serves them as if it had read them itself. An admitted request holds its ticket, and its
  budget counts from this read, less its wait in the kernel: from the kernel's stamp of its
  arrival (``held_sockets.stamp_arrivals``) to the nanosecond, or where there is none from
  ``TCP_INFO`` to a jiffy (``app.frontdoor.socket_wait``).

Handed over as read, undecided: a request not complete ``PARTIAL_S`` after its first bytes, or
larger than ``MAX_READ_BYTES``, pipelined behind another, with ``Expect`` or an upgrade, or not
parsable (the protocol answers it, a 400 there).

The thread runs Python, so it waits for the interpreter's lock while the loop's thread holds it:
up to the switch interval (5 ms) before that thread is made to let go. It waits once a wake-up:
its socket calls keep the lock (``held_sockets``), and what would let go of it (logging and
tracing the refusals sent, waking the loop for the connections handed over) is done once, after
every ready connection has been answered.

A wake-up is kept for what comes while it answers, up to ``TURN_S``: connections that arrived
meanwhile, and the bodies of the heads it read (a client often writes them apart, a fraction of
a millisecond later). It waits for those bodies, keeping the lock, ``BODY_WAIT_S`` at most; a
body that came later would cost another wait for the lock, up to 5 ms in a burst. A head whose
body does not come is waited for in the turn that read it only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import httptools

from app.frontdoor.gate import Gate, Refused
from app.frontdoor.protocol import AdmittingProtocol
from app.frontdoor.read_ahead import held_sockets
from app.frontdoor.read_ahead.connections import Connection, Prelude, waited_ms
from tracing import metrics
from tracing.budget.door.ticket import Ticket

log = logging.getLogger("ragtime")

#: A request still incomplete this long after its first bytes goes to the loop as read.
PARTIAL_S = 1.0
#: A request with more than this read goes to the loop as read (a question's body is small).
MAX_READ_BYTES = 64 * 1024
#: How often the thread looks for connections past ``PARTIAL_S`` or their keep-alive.
SWEEP_S = 0.05
#: A refusal's client that leaves its receive window full is given this long to read it.
SEND_TIMEOUT_S = 1.0
#: The longest a turn keeps the interpreter's lock, answering what arrives while it answers:
#: the switch interval, as long as the interpreter lets any thread keep it.
TURN_S = 0.005
#: Of that, the longest it waits, keeping the lock, for the bodies of the heads it read.
BODY_WAIT_S = 0.002


class ReadAhead:
    """The thread reading ``listener``'s connections ahead of ``loop``. ``protocol`` makes the
    server's HTTP protocol (on the loop); ``default_headers`` are the server's now (its date)."""

    def __init__(
        self,
        listener: socket.socket,
        *,
        gate: Gate,
        loop: asyncio.AbstractEventLoop,
        protocol: Callable[[], asyncio.Protocol],
        default_headers: Callable[[], list[tuple[bytes, bytes]]],
        keep_alive_s: float,
    ) -> None:
        self.listener = listener
        self.gate = gate
        self.loop = loop
        self.protocol = protocol
        self.default_headers = default_headers
        self.keep_alive_s = keep_alive_s
        self._poller = held_sockets.Poller()
        self._wake_r, self._wake_w = socket.socketpair()
        self._connections: dict[int, Connection] = {}
        self._refused: list[tuple[dict[str, Any], Refused, float]] = []
        self._handing: list[tuple[int, Prelude]] = []
        self._waits: list[float] = []
        self._heads: list[tuple[int, Connection]] = []
        """This turn's connections whose head is read and whose body is still to come."""
        self._stopping = False
        self._attaching: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self._run, name="ragtime-read-ahead", daemon=True)
        self._access = logging.getLogger("uvicorn.access")
        self._tcp = listener.family in (socket.AF_INET, socket.AF_INET6)
        """Its connections are TCP (``TCP_NODELAY``), not a Unix socket's."""
        self._stamped = False
        """The kernel stamps its connections' segments as they arrive (set at ``start``)."""

    def start(self) -> None:
        self.listener.setblocking(False)
        self._stamped = held_sockets.stamp_arrivals(self.listener)
        self._wake_r.setblocking(False)
        self._poller.register(self.listener.fileno())
        self._poller.register(self._wake_r.fileno())
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting, close the connections still held here, and end the thread."""
        self._stopping = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")
        self._thread.join(timeout=5)

    # -- the thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        swept = time.perf_counter()
        try:
            while not self._stopping:
                try:
                    swept = self._turn(swept)
                except Exception:  # the thread must go on: it is the process's only listener
                    log.exception("read-ahead: a turn failed")
                    time.sleep(0.01)
        finally:
            for connection in list(self._connections.values()):
                self._close(connection)
            self._poller.close()
            for sock in (self.listener, self._wake_r, self._wake_w):
                sock.close()

    def _turn(self, swept: float) -> float:
        """Wait for what is ready and answer it, and, keeping the interpreter's lock, what
        comes meanwhile (``TURN_S`` at most, ``BODY_WAIT_S`` of it waiting for bodies); then do
        what lets go of the lock; every ``SWEEP_S``, sweep. When it last swept."""
        timeout = SWEEP_S if self._connections else None
        try:
            ready = self._poller.wait(timeout)
            began, waited = time.perf_counter(), 0.0
            self._heads.clear()
            while True:
                self._answer(ready)
                if time.perf_counter() - began >= TURN_S:
                    break
                holding = waited < BODY_WAIT_S and self._awaiting_body()
                start = time.perf_counter()
                ready = self._poller.wait_held(1 if holding else 0)
                if holding:
                    waited += time.perf_counter() - start
                elif not ready:
                    break
            now = time.perf_counter()
            if now - swept >= SWEEP_S:
                self._sweep(now)
                swept = now
        finally:
            self._account()
        return swept

    def _answer(self, ready: list[int]) -> None:
        for fd in ready:
            if fd == self.listener.fileno():
                self._accept()
            elif fd == self._wake_r.fileno():
                with contextlib.suppress(OSError):
                    self._wake_r.recv(64)
            elif (connection := self._connections.get(fd)) is not None:
                self._step(connection)

    def _awaiting_body(self) -> bool:
        """Whether a head read this turn still waits here for its body."""
        return any(
            self._connections.get(fd) is connection and not connection.request.complete
            for fd, connection in self._heads
        )

    def _accept(self) -> None:
        while True:
            try:
                sock = held_sockets.accept(self.listener)
            except OSError as exc:  # out of descriptors: let some close before trying again
                log.warning("read-ahead: accept failed: %s", exc)
                time.sleep(0.05)
                return
            if sock is None:
                return
            try:
                if self._tcp:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._poller.register(sock.fd)
            except OSError:  # gone already
                sock.close()
                continue
            connection = Connection(sock)
            self._connections[sock.fd] = connection
            self._step(connection)  # its request is often there already

    def _step(self, connection: Connection) -> None:
        """Read what ``connection`` has, and decide its request once it is whole. A fault here
        is one connection's: it goes to the loop undecided (or is closed), the thread goes on."""
        try:
            self._read(connection)
        except Exception:
            log.exception("read-ahead: a connection's request could not be read here")
            if self._connections.get(connection.sock.fd) is not connection:
                return
            if connection.data:
                self._hand_over(connection)
            else:
                self._close(connection)

    def _read(self, connection: Connection) -> None:
        first = not connection.data
        try:
            if first and self._stamped:
                data, arrived_ns = connection.sock.recv_stamped()
            else:
                data, arrived_ns = connection.sock.recv(), None
        except OSError:
            self._close(connection)
            return
        if data is None:
            return
        if not data:
            self._close(connection)
            return
        if first:
            now = time.perf_counter()
            waited = waited_ms(connection.sock, arrived_ns)
            connection.read_at, connection.received_at = now, now - waited / 1000.0
            connection.idle_since = None
            self._waits.append(waited / 1000.0)
        connection.data += data
        try:
            connection.parser.feed_data(data)
        except httptools.HttpParserError:  # an upgrade too: the protocol answers either
            self._hand_over(connection)
            return
        request = connection.request
        if request.begun > 1 or len(connection.data) > MAX_READ_BYTES:
            self._hand_over(connection)
        elif request.head_read:
            self._decide(connection)

    def _decide(self, connection: Connection) -> None:
        """Once a request's head is read: to the loop now if the gate does not take it (it
        may be waiting for a reply before it sends its body: ``Expect``); else, once its body
        is read too, admitted (to the loop) or refused (here)."""
        request, gate = connection.request, self.gate
        scope = connection.scope()
        if scope is None or not gate.takes(scope):
            self._hand_over(connection)
            return
        if not request.complete:
            self._heads.append((connection.sock.fd, connection))
            return
        verdict = gate.admit(scope, bytes(request.body))
        if not isinstance(verdict, Refused):
            self._hand_over(connection, verdict)
            return
        keep_alive = connection.parser.should_keep_alive()
        response = gate.refusal(scope, verdict, close=not keep_alive)
        wire = response.wire(self.default_headers())
        try:
            connection.sock.send_all(wire, SEND_TIMEOUT_S)
            sent = True
        except OSError:
            sent = False
        sent_at = time.perf_counter()
        self._refused.append((scope, verdict, sent_at))
        if sent and keep_alive:
            connection.reset(sent_at)
        else:
            self._close(connection)

    def _account(self) -> None:
        """After a turn's answers, what may wait for the interpreter's lock or for a lock the
        loop's thread holds (the metrics' own among them): count what was read and handed
        over (before the loop serves it), give the loop its connections, then log, count and
        trace the refusals sent."""
        handing, self._handing = self._handing, []
        refused, self._refused = self._refused, []
        waits, self._waits = self._waits, []
        try:
            for waited_s in waits:
                metrics.REQUEST_SOCKET_WAIT_SECONDS.observe(waited_s)
            for _, prelude in handing:
                outcome = "admitted" if prelude.admitted else "passed"
                metrics.READ_AHEAD_REQUESTS.labels(outcome=outcome).inc()
        finally:  # a connection not given to the loop would hold its place for good
            if handing:
                try:
                    self.loop.call_soon_threadsafe(self._attach_all, handing)
                except RuntimeError:  # the loop is closed
                    for fd, prelude in handing:
                        self._dropped(fd, prelude)
        for scope, verdict, sent_at in refused:
            try:
                metrics.READ_AHEAD_REQUESTS.labels(outcome="refused").inc()
                self.gate.refused(scope, verdict, self._access, sent_at)
            except Exception:  # the refusal is sent: the connection goes on
                log.exception("read-ahead: a refusal could not be counted")

    def _sweep(self, now: float) -> None:
        for connection in list(self._connections.values()):
            if connection.data and now - connection.read_at > PARTIAL_S:
                self._hand_over(connection)  # a slow client's request: the loop reads on
            elif (
                connection.idle_since is not None
                and now - connection.idle_since > self.keep_alive_s
            ):
                self._close(connection)

    def _forget(self, connection: Connection) -> None:
        if self._connections.pop(connection.sock.fd, None) is not None:
            with contextlib.suppress(OSError):
                self._poller.unregister(connection.sock.fd)

    def _close(self, connection: Connection) -> None:
        self._forget(connection)
        connection.sock.close()

    def _hand_over(self, connection: Connection, ticket: Ticket | None = None) -> None:
        """Give the connection, with what was read of it, to the loop's HTTP protocol (at the
        turn's end)."""
        self._forget(connection)
        prelude = connection.prelude(ticket)
        self._handing.append((connection.sock.detach(), prelude))

    # -- on the loop ---------------------------------------------------------------------------

    def _attach_all(self, handing: list[tuple[int, Prelude]]) -> None:
        for fd, prelude in handing:
            task = self.loop.create_task(self._connect(fd, prelude))
            self._attaching.add(task)
            task.add_done_callback(self._attaching.discard)

    async def _connect(self, fd: int, prelude: Prelude) -> None:
        if self._stopping:
            self._dropped(fd, prelude)
            return

        def protocol() -> asyncio.Protocol:
            made = self.protocol()
            if isinstance(made, AdmittingProtocol):
                made.take_over(prelude)
            return made

        sock: socket.socket | None = None
        try:
            sock = socket.socket(fileno=fd)
            await self.loop.connect_accepted_socket(protocol, sock)
        except Exception:
            log.exception("read-ahead: a connection could not be handed to the loop")
            self._dropped(fd if sock is None else sock.detach(), prelude)

    def _dropped(self, fd: int, prelude: Prelude) -> None:
        """A connection the loop will not serve: closed (where it is still open), its place
        given back."""
        with contextlib.suppress(OSError):
            os.close(fd)
        if (ticket := prelude.take_ticket()) is not None:
            self.gate.finished(ticket, learn=False)
