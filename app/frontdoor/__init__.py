"""The front door: everything that happens before the ASGI app decides (issue 42 §1).

``gate``: the one admission decision (a place in the process, then a ticket by predicted
finish), the refusal it writes, the budget it reads and the arrival clock; ``middleware``: the
arrival stamp's one fallback and that decision for the ASGI app; ``protocol``: the same
decision as uvicorn's HTTP protocol parses a request (the one module on uvicorn's private API);
``server``: the server class that signals reach, its watchdog; ``workers``: our supervisor of
``--workers N`` processes; ``run``: one process or several; ``shutdown``: the grace, the
requests in flight during it, and the one refuser of the stop (503 ``shutting_down``);
``listeners``: a socket per process; ``socket_wait``: how long a request waited in the kernel;
``heap``: the start-up heap kept out of the collector's full passes; ``read_ahead/``: the opt-in
plug-in that reads requests ahead of the event loop."""
