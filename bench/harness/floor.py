"""The floors of our stack, each in its own process: what ragtime is measured against.

The bare floor (the default) is FastAPI + uvicorn + sse-starlette streaming with no work:
``POST /v1/ask`` reads the JSON body and streams ``--tokens`` ``token`` events and a ``done``
event shaped like ragtime's (with no budget: the floor keeps none), from precomputed strings.
Whatever ragtime takes beyond it, on the same machine and under the same load, is ragtime's own
cost, its inherent work included. This process never imports the ``app`` package or its models::

    python -m bench.harness.floor --port 8100 --tokens 16

The same-work floor (``--same-work DATA_DIR``) does, per request, the work a question inherently
costs ragtime with ragtime's own library calls over the same stored collection
(``bench.harness.same_work``: the question screen, the question's embedding, the FAISS and BM25
searches, the prompt), on one worker thread, then streams a ``citations`` event (the passages),
the ``--tokens`` null tokens and a ``done`` event with the prompt's and answer's token counts;
a question the screen rejects is a 400. None of ragtime's machinery runs (no budget, admission,
spans, metrics, caches, auth): what ragtime takes beyond this floor is its machinery's cost::

    python -m bench.harness.floor --port 8100 --tokens 16 --same-work bench-results/data

``--workers N`` serves from N processes (uvicorn's workers), as ragtime serves from as many as
its ``auto`` setting gives (one per core, at most 4, with the null backend).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse

if TYPE_CHECKING:
    from bench.harness.same_work import SameWork

TOKEN = json.dumps({"text": "ok "})
#: The environment a worker process reads its floor's options from (``app_from_env``).
ENV_TOKENS = "RAGTIME_FLOOR_TOKENS"
ENV_SAME_WORK = "RAGTIME_FLOOR_SAME_WORK"
ENV_COLLECTION = "RAGTIME_FLOOR_COLLECTION"


def _done(model: str, usage: dict[str, int] | None = None) -> str:
    done: dict[str, Any] = {
        "timings_ms": {},
        "degradations": [],
        "finish_reason": "length",
        "model": model,
    }
    if usage is not None:
        done["usage"] = usage
    return json.dumps(done)


def create_floor_app(tokens: int, work: SameWork | None = None) -> FastAPI:
    """The bare floor, or with ``work`` the same-work floor (see the module's docstring)."""
    if tokens < 1:
        raise ValueError(f"tokens must be >= 1, got {tokens}")
    done = _done("floor")
    app = FastAPI(title="ragtime bench floor")

    @app.post("/v1/ask", response_model=None)
    async def ask(request: Request) -> EventSourceResponse | JSONResponse:
        body = await request.json()
        if work is None:

            async def events() -> AsyncIterator[dict[str, str]]:
                for _ in range(tokens):
                    yield {"event": "token", "data": TOKEN}
                yield {"event": "done", "data": done}

            return EventSourceResponse(events())
        return await _same_work_answer(work, str(body.get("question", "")), tokens)

    @app.get("/readyz")
    async def readyz() -> dict[str, bool]:
        return {"ready": True}

    return app


async def _same_work_answer(
    work: SameWork, question: str, tokens: int
) -> EventSourceResponse | JSONResponse:
    from app.safety.moderation import QuestionRejected

    if not question.strip():
        return JSONResponse({"error": {"type": "invalid_request", "message": "no question"}}, 422)
    try:
        prepared = await asyncio.to_thread(work.prepare, question)
    except QuestionRejected as exc:
        return JSONResponse({"error": {"type": "question_rejected", "message": str(exc)}}, 400)
    cited = [
        {"label": n, "source": p.source, "title": p.title, "section": p.section, "text": p.text}
        for n, p in enumerate(prepared.passages, start=1)
    ]
    usage = {"prompt_tokens": prepared.prompt.prompt_tokens, "completion_tokens": tokens}
    done = _done("floor-same-work", usage)

    async def events() -> AsyncIterator[dict[str, str]]:
        yield {"event": "citations", "data": json.dumps({"citations": cited})}
        for _ in range(tokens):
            yield {"event": "token", "data": TOKEN}
        yield {"event": "done", "data": done}

    return EventSourceResponse(events())


def app_from_env() -> FastAPI:
    """The floor that ``main`` configured through the environment (one per worker process)."""
    tokens = int(os.environ[ENV_TOKENS])
    data_dir = os.environ.get(ENV_SAME_WORK)
    if not data_dir:
        return create_floor_app(tokens)
    from bench.harness.same_work import SameWork

    collection = os.environ.get(ENV_COLLECTION) or "demo"
    return create_floor_app(tokens, SameWork.open(Path(data_dir), collection=collection))


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m bench.harness.floor", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tokens", type=int, required=True)
    parser.add_argument(
        "--same-work",
        type=Path,
        metavar="DATA_DIR",
        help="do ragtime's inherent work per request over DATA_DIR's stored collection",
    )
    parser.add_argument("--collection", default="demo", help="with --same-work: which one")
    parser.add_argument("--workers", type=int, default=1, help="server processes")
    args = parser.parse_args(argv)
    os.environ[ENV_TOKENS] = str(args.tokens)
    os.environ[ENV_SAME_WORK] = str(args.same_work or "")
    os.environ[ENV_COLLECTION] = args.collection
    if args.workers > 1:
        uvicorn.run(
            "bench.harness.floor:app_from_env", factory=True, workers=args.workers,
            host=args.host, port=args.port, log_level="warning",
        )  # fmt: skip
    else:
        uvicorn.run(app_from_env(), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
