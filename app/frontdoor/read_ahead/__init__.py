"""The read-ahead plug-in (opt-in: ``RAGTIME_SERVE_READ_AHEAD``): a thread that owns a
process's listening socket, reads each connection's first request ahead of the event loop and
decides its admission there (``reader``), through socket calls that keep the interpreter's lock
(``held_sockets``). Nothing outside this folder knows about it but the server, which starts it."""
