"""The physical floor of our stack: FastAPI + uvicorn + sse-starlette streaming with no work.

``POST /v1/ask`` reads the JSON body and streams ``--tokens`` ``token`` events and a ``done``
event shaped like ragtime's (with no budget: the floor keeps none), from precomputed strings.
Whatever ragtime takes beyond this, on the same machine and under the same load, is ragtime's
own overhead. Run it as its own process (it never imports the ``app`` package or its models)::

    python -m bench.harness.floor --port 8100 --tokens 16
"""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from sse_starlette import EventSourceResponse

TOKEN = json.dumps({"text": "ok "})


def create_floor_app(tokens: int) -> FastAPI:
    if tokens < 1:
        raise ValueError(f"tokens must be >= 1, got {tokens}")
    done = json.dumps(
        {
            "timings_ms": {},
            "degradations": [],
            "finish_reason": "length",
            "model": "floor",
        }
    )
    app = FastAPI(title="ragtime bench floor")

    @app.post("/v1/ask")
    async def ask(request: Request) -> EventSourceResponse:
        await request.json()

        async def events() -> AsyncIterator[dict[str, str]]:
            for _ in range(tokens):
                yield {"event": "token", "data": TOKEN}
            yield {"event": "done", "data": done}

        return EventSourceResponse(events())

    @app.get("/readyz")
    async def readyz() -> dict[str, bool]:
        return {"ready": True}

    return app


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m bench.harness.floor", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tokens", type=int, required=True)
    args = parser.parse_args(argv)
    uvicorn.run(create_floor_app(args.tokens), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
