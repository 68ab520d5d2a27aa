"""Serving a listening socket through the read-ahead thread, once the app has started: the one
entry the server calls when the plug-in is on (``RAGTIME_SERVE_READ_AHEAD``)."""

from __future__ import annotations

import asyncio
import socket

import uvicorn

from app.frontdoor.gate import GATE_KEY, Gate
from app.frontdoor.protocol import AdmittingProtocol
from app.frontdoor.read_ahead import held_sockets
from app.frontdoor.read_ahead.reader import ReadAhead


async def listen(server: uvicorn.Server, listener: socket.socket) -> ReadAhead | None:
    """Serve ``listener`` for ``server`` (its app started): through a thread reading ahead of
    the event loop where the app's gate decides and the platform has its calls (that thread,
    started), else on the loop as uvicorn's ``startup`` would (``None``)."""
    config = server.config

    def protocol() -> asyncio.Protocol:
        """The server's HTTP protocol for one connection, as uvicorn's ``startup`` makes it."""
        made: asyncio.Protocol = config.http_protocol_class(  # type: ignore[call-arg]
            config=config, server_state=server.server_state, app_state=server.lifespan.state
        )
        return made

    gate = server.lifespan.state.get(GATE_KEY)
    if not (
        isinstance(gate, Gate)
        and gate.decides
        and issubclass(config.http_protocol_class, AdmittingProtocol)
        and held_sockets.available()
    ):
        loop_server = await asyncio.get_running_loop().create_server(
            protocol, sock=listener, backlog=config.backlog
        )
        server.servers.append(loop_server)
        return None
    reader = ReadAhead(
        listener,
        gate=gate,
        loop=asyncio.get_running_loop(),
        protocol=protocol,
        default_headers=lambda: server.server_state.default_headers,
        keep_alive_s=config.timeout_keep_alive,
    )
    reader.start()
    return reader
