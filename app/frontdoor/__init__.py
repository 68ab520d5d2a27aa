"""The front door: what happens before the ASGI app decides (issue 42 §1). ``server``: the
server class that signals reach, its watchdog, one process or several; ``shutdown``: the grace,
the requests in flight during it, the 503 ``shutting_down``. Admission at the door, listeners
and the read-ahead thread still sit at ``app/``'s top level."""
