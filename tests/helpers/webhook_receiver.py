"""A webhook receiver on 127.0.0.1 for alert notifications: records each JSON body POSTed to it
and when it came (``time.monotonic``, and the wall clock's ``time.time``), and answers with the
statuses of ``replies`` first, then 200. Alertmanager's webhook and ragtime's in-process
evaluator both post to it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    """A webhook receiver: records each JSON body and when it came; answers ``replies`` first."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.arrivals: list[float] = []
        self.arrived_at: list[float] = []
        self.replies: list[int] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                receiver.bodies.append(json.loads(self.rfile.read(length)))
                receiver.arrivals.append(time.monotonic())
                receiver.arrived_at.append(time.time())
                self.send_response(receiver.replies.pop(0) if receiver.replies else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"


@contextmanager
def receiving() -> Iterator[Receiver]:
    """A receiver serving on a thread for the block."""
    receiver = Receiver()
    thread = threading.Thread(target=receiver.server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
        thread.join(timeout=5)
