"""A fake of SGLang's gateway (sgl-model-gateway, ``python -m sglang_router.launch_router``) in
front of fake SGLang workers, written from its source (sgl-project/sglang, sgl-model-gateway/):

- routes (``src/server.rs::build_app``): ``/generate`` is proxied to a worker; ``/liveness`` and
  ``/health`` always answer 200 "OK"; ``/readiness`` answers 200 with the healthy and total
  worker counts, or 503 "insufficient healthy workers" when none is healthy; ``/model_info`` and
  ``/server_info`` are a worker's; ``/v1/loads`` and ``/engine_metrics`` are aggregates; anything
  else (``/ready``, ``/metrics``, ``/abort_request``) falls to ``sink_handler``: 404.
- ``/v1/loads`` (``src/core/worker_manager.rs::get_all_worker_loads``): ``{"loads": [{"worker",
  "worker_type", "load"}], "total_workers", "successful", "failed"}``, each ``load`` read from
  the worker's ``/get_load``, which SGLang 0.5.23 no longer has: -1 (``unwrap_or(-1)``).
- ``/engine_metrics`` (``get_engine_metrics`` and ``src/core/metrics_aggregator.rs``): every
  worker's ``/metrics``, with ``:`` replaced by ``_`` throughout (its parser cannot read colons)
  and a ``worker_addr`` label added to every sample.

Workers are tried round robin (the policy does not matter to a client); health is each worker's
``/health`` (the gateway's ``--health-check-endpoint`` default).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import AsyncIterator

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

_SAMPLE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\{([^}]*)\})?(\s+.*)$")


class FakeGateway:
    """The gateway over ``workers`` (their base URLs)."""

    def __init__(self, workers: list[str]) -> None:
        self.workers = list(workers)
        self._turn = itertools.cycle(range(len(self.workers)))
        self.app = Starlette(
            routes=[
                Route("/generate", self.generate, methods=["POST"]),
                Route("/liveness", self.liveness, methods=["GET"]),
                Route("/health", self.liveness, methods=["GET"]),
                Route("/readiness", self.readiness, methods=["GET"]),
                Route("/model_info", self.model_info, methods=["GET"]),
                Route("/server_info", self.server_info, methods=["GET"]),
                Route("/v1/loads", self.loads, methods=["GET"]),
                Route("/engine_metrics", self.engine_metrics, methods=["GET"]),
            ]
        )

    async def _healthy(self) -> list[str]:
        async with httpx.AsyncClient(timeout=5.0) as client:
            found = []
            for url in self.workers:
                try:
                    if (await client.get(url + "/health")).status_code == 200:
                        found.append(url)
                except httpx.HTTPError:
                    pass
            return found

    async def liveness(self, request: Request) -> Response:
        return PlainTextResponse("OK")

    async def readiness(self, request: Request) -> Response:
        healthy = await self._healthy()
        if healthy:
            body = {
                "status": "ready",
                "healthy_workers": len(healthy),
                "total_workers": len(self.workers),
            }
            return JSONResponse(body)
        body = {"status": "not ready", "reason": "insufficient healthy workers"}
        return JSONResponse(body, status_code=503)

    async def _from_a_worker(self, path: str) -> Response:
        async with httpx.AsyncClient(timeout=5.0) as client:
            response = await client.get(self.workers[0] + path)
        return Response(response.content, response.status_code, media_type="application/json")

    async def model_info(self, request: Request) -> Response:
        return await self._from_a_worker("/model_info")

    async def server_info(self, request: Request) -> Response:
        return await self._from_a_worker("/server_info")

    async def loads(self, request: Request) -> Response:
        loads = [{"worker": url, "worker_type": None, "load": -1} for url in self.workers]
        body = {"loads": loads, "total_workers": len(loads), "successful": 0, "failed": len(loads)}
        return JSONResponse(body)

    async def engine_metrics(self, request: Request) -> Response:
        lines: list[str] = []
        async with httpx.AsyncClient(timeout=5.0) as client:
            for url in self.workers:
                response = await client.get(url + "/metrics")
                if response.status_code != 200:
                    continue
                for line in response.text.replace(":", "_").splitlines():
                    lines.append(_with_label(line, "worker_addr", url.replace(":", "_")))
        return PlainTextResponse("\n".join(lines) + "\n")

    async def generate(self, request: Request) -> Response:
        body = await request.body()
        url = self.workers[next(self._turn)] + "/generate"
        client = httpx.AsyncClient(timeout=None)
        headers = {"content-type": "application/json"}
        forward = client.build_request("POST", url, content=body, headers=headers)
        upstream = await client.send(forward, stream=True)

        async def relay() -> AsyncIterator[bytes]:
            try:
                async for chunk in upstream.aiter_raw():
                    yield chunk
            finally:
                await upstream.aclose()
                await client.aclose()

        return StreamingResponse(
            relay(),
            status_code=upstream.status_code,
            media_type=upstream.headers.get("content-type"),
        )


def _with_label(line: str, name: str, value: str) -> str:
    match = _SAMPLE.match(line)
    if line.startswith("#") or match is None:
        return line
    labels = f'{match.group(3)},{name}="{value}"' if match.group(3) else f'{name}="{value}"'
    return f"{match.group(1)}{{{labels}}}{match.group(4)}"
