"""Sockets whose calls keep the interpreter's lock, for the thread that reads ahead of the loop.

CPython lets go of its lock (the GIL) around every socket call, and a thread that let go must
take it back from the threads that took it meanwhile: while the event loop's thread runs Python,
that can take up to the switch interval (5 ms), again after every call. The read-ahead thread
(``app.frontdoor.read_ahead``) made five or so such calls a refusal (accept, register, read, write,
unregister), and in a burst each refusal waited tens of milliseconds for the lock between
them (docs/studies/front-door.md, "Refusals without letting go of the interpreter's lock").

Those calls do not block: the sockets are non-blocking, and each returns in microseconds. Made
through ``ctypes.PyDLL``, which keeps the lock across a call, they cost the thread no wait at
all, so it waits for the lock once a wake-up (its ``epoll`` wait lets go, as any blocking wait
must) and then answers every connection that is ready. Linux only (``accept4`` and ``epoll``);
``available`` says whether this platform has them.

``stamp_arrivals`` has the kernel stamp each segment as it arrives (``SO_TIMESTAMPNS``), and
``HeldSocket.recv_stamped`` returns the stamp of the last one read with the bytes: how long a
request waited before its read, to the nanosecond, where ``TCP_INFO`` counts in jiffies (4 ms).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import select
import socket
import struct
import sys
import threading
import time
from typing import Any

#: ``epoll_ctl``'s operations and ``EPOLLIN`` (sys/epoll.h).
_EPOLL_CTL_ADD, _EPOLL_CTL_DEL, _EPOLLIN = 1, 2, 0x001
_SOCKADDR_BYTES = 128  # sizeof(struct sockaddr_storage)
#: ``SO_TIMESTAMPNS`` and its control message's type (asm-generic/socket.h, which x86 and arm
#: use; other machines number it otherwise, and read without stamps).
_SO_TIMESTAMPNS = 35 if platform.machine() in ("x86_64", "AMD64", "aarch64", "arm64") else None
#: Room for the control messages ``recvmsg`` returns: one ``struct timespec``, with headroom.
_CONTROL_BYTES = 64
#: A control message's alignment, and its header's length (``CMSG_LEN(0)``).
_CMSG_WORD = ctypes.sizeof(ctypes.c_size_t)
_CMSG_HEADER = -(-struct.calcsize("@Nii") // _CMSG_WORD) * _CMSG_WORD
#: The most one ``recv`` reads.
RECV_BYTES = 65536
#: The most descriptors one ``Poller.wait_held`` returns (the rest, at the next).
WAIT_EVENTS = 64
_buffers = threading.local()


class _EpollEvent(ctypes.Structure):
    """``struct epoll_event`` with its data as the fd: packed on x86-64, aligned elsewhere."""

    _pack_ = 1 if platform.machine() in ("x86_64", "AMD64") else 0
    _fields_ = [("events", ctypes.c_uint32), ("data", ctypes.c_uint64)]


class _IoVec(ctypes.Structure):
    """``struct iovec``."""

    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


class _MsgHdr(ctypes.Structure):
    """``struct msghdr`` (sys/socket.h)."""

    _fields_ = [
        ("name", ctypes.c_void_p),
        ("namelen", ctypes.c_uint32),
        ("iov", ctypes.POINTER(_IoVec)),
        ("iovlen", ctypes.c_size_t),
        ("control", ctypes.c_void_p),
        ("controllen", ctypes.c_size_t),
        ("flags", ctypes.c_int),
    ]


@functools.cache
def _libc() -> Any:
    """The C library, its calls keeping the interpreter's lock (``PyDLL``)."""
    libc = ctypes.PyDLL(None, use_errno=True)
    libc.accept4.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    libc.recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.recv.restype = ctypes.c_ssize_t
    libc.recvmsg.argtypes = [ctypes.c_int, ctypes.POINTER(_MsgHdr), ctypes.c_int]
    libc.recvmsg.restype = ctypes.c_ssize_t
    libc.send.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
    libc.send.restype = ctypes.c_ssize_t
    libc.setsockopt.argtypes = [
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_uint32,
    ]
    libc.getsockopt.argtypes = [
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_uint32),
    ]
    libc.epoll_ctl.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    libc.close.argtypes = [ctypes.c_int]
    libc.epoll_wait.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    return libc


def available() -> bool:
    """Whether this platform has the calls (Linux, with ``accept4`` and ``epoll``)."""
    if not sys.platform.startswith("linux") or not hasattr(select, "epoll"):
        return False
    try:
        libc = _libc()
    except OSError:
        return False
    calls = ("accept4", "recv", "recvmsg", "send", "epoll_ctl", "epoll_wait")
    return all(hasattr(libc, name) for name in calls)


def stamp_arrivals(listener: socket.socket) -> bool:
    """Have the kernel stamp the segments of ``listener``'s connections as they arrive (its
    connections inherit the option), for ``HeldSocket.recv_stamped``. False where it cannot: a
    machine whose number for the option is not known here, a Unix socket, a refusal."""
    if _SO_TIMESTAMPNS is None or listener.family not in (socket.AF_INET, socket.AF_INET6):
        return False
    try:
        listener.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def _buffer() -> Any:
    """The calling thread's one read buffer."""
    buffer = getattr(_buffers, "recv", None)
    if buffer is None:
        buffer = _buffers.recv = ctypes.create_string_buffer(RECV_BYTES)
    return buffer


def _message() -> tuple[Any, Any, _IoVec, _MsgHdr]:
    """The calling thread's read buffer, control buffer and the ``msghdr`` that points at them."""
    parts = getattr(_buffers, "message", None)
    if parts is None:
        data, control = _buffer(), ctypes.create_string_buffer(_CONTROL_BYTES)
        vector = _IoVec(ctypes.cast(data, ctypes.c_void_p), RECV_BYTES)
        header = _MsgHdr()
        header.iov, header.iovlen = ctypes.pointer(vector), 1
        header.control = ctypes.cast(control, ctypes.c_void_p)
        parts = _buffers.message = (data, control, vector, header)
    return parts


def _arrival_ns(control: bytes) -> int | None:
    """The ``SCM_TIMESTAMPNS`` stamp among the control messages ``control`` holds, in
    nanoseconds of ``CLOCK_REALTIME`` (``time.time_ns``); None when there is none."""
    offset = 0
    while offset + _CMSG_HEADER <= len(control):
        size, level, kind = struct.unpack_from("@Nii", control, offset)
        if size < _CMSG_HEADER:
            return None
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS:
            seconds, nanos = struct.unpack_from("@ll", control, offset + _CMSG_HEADER)
            return seconds * 1_000_000_000 + nanos
        offset += -(-size // _CMSG_WORD) * _CMSG_WORD  # CMSG_ALIGN
    return None


def _raise(call: str) -> None:
    code = ctypes.get_errno()
    raise OSError(code, f"{call}: {os.strerror(code)}")


def _would_block() -> bool:
    return ctypes.get_errno() in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR)


def _address(family: int, raw: bytes) -> tuple[str, int] | None:
    """A ``sockaddr_in`` or ``sockaddr_in6`` as host and port (None: another family)."""
    port = int.from_bytes(raw[2:4], "big")
    if family == socket.AF_INET:
        return socket.inet_ntop(socket.AF_INET, raw[4:8]), port
    if family == socket.AF_INET6:
        return socket.inet_ntop(socket.AF_INET6, raw[8:24]), port
    return None


class HeldSocket:
    """A connected, non-blocking socket by its descriptor. ``recv`` and ``send`` return at once:
    ``None`` and 0 where they would block."""

    def __init__(self, fd: int, peer: tuple[str, int] | None = None) -> None:
        self.fd = fd
        self.peer = peer

    def fileno(self) -> int:
        return self.fd

    def recv(self, size: int = RECV_BYTES) -> bytes | None:
        """Up to ``size`` bytes (``b""``: the peer closed; ``None``: nothing yet), read into the
        calling thread's one buffer: a connection held idle keeps none of its own."""
        buffer = _buffer()
        got = _libc().recv(self.fd, buffer, min(size, RECV_BYTES), 0)
        if got < 0:
            if _would_block():
                return None
            _raise("recv")
        return ctypes.string_at(buffer, got)

    def recv_stamped(self, size: int = RECV_BYTES) -> tuple[bytes | None, int | None]:
        """``recv``'s bytes, and when the last segment read arrived (``time.time_ns``'s clock)
        where the kernel stamped it (``stamp_arrivals``), else None."""
        data, control, vector, header = _message()
        vector.length = min(size, RECV_BYTES)
        header.controllen, header.flags = _CONTROL_BYTES, 0
        got = _libc().recvmsg(self.fd, ctypes.byref(header), 0)
        if got < 0:
            if _would_block():
                return None, None
            _raise("recvmsg")
        stamp = _arrival_ns(ctypes.string_at(control, header.controllen))
        return ctypes.string_at(data, got), stamp

    def send(self, data: bytes) -> int:
        """Bytes of ``data`` written (0: the send buffer is full)."""
        sent = _libc().send(self.fd, data, len(data), socket.MSG_NOSIGNAL)
        if sent < 0:
            if _would_block():
                return 0
            _raise("send")
        return int(sent)

    def send_all(self, data: bytes, timeout_s: float) -> None:
        """Write ``data`` whole: at once where the send buffer has room, else waiting (and
        letting go of the lock) for a client that reads slowly, ``timeout_s`` at most."""
        deadline = time.monotonic() + timeout_s
        view = memoryview(data)
        while view:
            view = view[self.send(bytes(view)) :]
            if view:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([], [self.fd], [], left)[1]:
                    raise TimeoutError("send: the client does not read")

    def setsockopt(self, level: int, option: int, value: int) -> None:
        flag = ctypes.c_int(value)
        if _libc().setsockopt(self.fd, level, option, ctypes.byref(flag), ctypes.sizeof(flag)):
            _raise("setsockopt")

    def getsockopt(self, level: int, option: int, size: int) -> bytes:
        out = ctypes.create_string_buffer(size)
        length = ctypes.c_uint32(size)
        if _libc().getsockopt(self.fd, level, option, out, ctypes.byref(length)):
            _raise("getsockopt")
        return out.raw[: length.value]

    def detach(self) -> int:
        """The descriptor, no longer this object's to close."""
        fd, self.fd = self.fd, -1
        return fd

    def close(self) -> None:
        if self.fd >= 0:
            _libc().close(self.detach())


def accept(listener: socket.socket) -> HeldSocket | None:
    """A connection waiting on the non-blocking ``listener``, non-blocking itself (``None``:
    none waits). Raises ``OSError`` where accepting fails (out of descriptors, say)."""
    raw = ctypes.create_string_buffer(_SOCKADDR_BYTES)
    length = ctypes.c_uint32(_SOCKADDR_BYTES)
    flags = socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC
    fd = _libc().accept4(listener.fileno(), raw, ctypes.byref(length), flags)
    if fd < 0:
        if _would_block() or ctypes.get_errno() == errno.ECONNABORTED:
            return None
        _raise("accept4")
    return HeldSocket(fd, _address(listener.family, raw.raw[: length.value]))


class Poller:
    """An ``epoll`` set whose changes keep the lock; ``wait`` lets go, as a blocking wait must."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._events = (_EpollEvent * WAIT_EVENTS)()
        """What ``wait_held`` is told, made once: one thread (the read-ahead's) waits here."""

    def register(self, fd: int) -> None:
        event = _EpollEvent(_EPOLLIN, fd)
        if _libc().epoll_ctl(self._epoll.fileno(), _EPOLL_CTL_ADD, fd, ctypes.byref(event)):
            _raise("epoll_ctl")

    def unregister(self, fd: int) -> None:
        """Stop watching ``fd`` (one not watched, or closed, is let be)."""
        failed = _libc().epoll_ctl(self._epoll.fileno(), _EPOLL_CTL_DEL, fd, None)
        if failed and ctypes.get_errno() not in (errno.ENOENT, errno.EBADF):
            _raise("epoll_ctl")

    def wait(self, timeout_s: float | None) -> list[int]:
        """The descriptors ready to read (or closed), after at most ``timeout_s``."""
        return [fd for fd, _ in self._epoll.poll(-1 if timeout_s is None else timeout_s)]

    def wait_held(self, timeout_ms: int) -> list[int]:
        """``wait``, keeping the interpreter's lock: no other thread runs meanwhile, so
        ``timeout_ms`` must be a millisecond or two at most (0: only what is ready now)."""
        events = self._events
        ready = _libc().epoll_wait(self._epoll.fileno(), events, WAIT_EVENTS, timeout_ms)
        if ready < 0:
            if _would_block():
                return []
            _raise("epoll_wait")
        return [int(events[i].data) for i in range(ready)]

    def close(self) -> None:
        self._epoll.close()
