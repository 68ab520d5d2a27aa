"""``ragtime serve``'s processes: one ``GracefulServer``, or ``--workers N`` of them under our
supervisor (``app.frontdoor.workers``), behind one address."""

from __future__ import annotations

import contextlib
import logging

import uvicorn

from app.frontdoor import listeners
from app.frontdoor.server import STARTUP_FAILURE, serving_server
from app.frontdoor.workers import Supervisor
from app.settings import get_settings

log = logging.getLogger("ragtime")


def serve(config: uvicorn.Config) -> int:
    """Serve ``config`` as ``uvicorn.run`` would; the exit status (``STARTUP_FAILURE`` when the
    server, or a worker, could not start)."""
    if config.workers <= 1:
        server = serving_server(config)
        with contextlib.suppress(KeyboardInterrupt):
            server.run()
        return 0 if server.started else STARTUP_FAILURE
    # Each worker on a socket of its own, the kernel spreading connections (the supervisor
    # only holds the address), or all on the supervisor's one socket.
    spread = get_settings().serve_reuse_port and listeners.supported()
    sock = listeners.reserve(config) if spread else config.bind_socket()
    if spread:
        log.info(
            "serving on http://%s:%d: %d processes, each on its own socket (SO_REUSEPORT)",
            config.host,
            config.port,
            config.workers,
        )
    with sock:
        return Supervisor(config, sockets=[] if spread else [sock]).supervise()
