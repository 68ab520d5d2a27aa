"""Serves the page: its document at ``/ui/`` (``/`` sends browsers there), its script and style
under ``/ui/static/``, and what it needs to know of the server at ``/ui/config.json``.

The page is a client of the API like any other: it sends the key the person typed (kept in
their browser) and reads the same JSON and Server-Sent Events. Its files ship in the package
(``static/``); the document's Content-Security-Policy lets it reach this server alone, so a
browser refuses any request to elsewhere (no CDN, no font service, no analytics).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from app.settings import Settings

STATIC = Path(__file__).parent / "static"
PAGE = "/ui/"
#: What the page may load and reach: its own files and this server's API, nothing else.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "form-action 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    ]
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def page_config(settings: Settings) -> dict[str, Any]:
    """What the page shows as defaults and limits, and where trace links go: nothing secret."""
    return {
        "budget_ms": {
            "default": settings.budget_ms_default,
            "min": settings.budget_ms_min,
            "max": settings.budget_ms_max,
        },
        "search_mode": settings.search_mode,
        "search_modes": ["dense", "keyword", "hybrid"],
        "max_search_k": settings.max_search_k,
        "top_k": settings.top_k,
        "jaeger_url": settings.jaeger_url,
    }


def install(app: FastAPI, settings: Settings) -> None:
    """Serve the page on ``app``, unless ``RAGTIME_UI`` is off."""
    if not settings.ui:
        return
    router = APIRouter(include_in_schema=False)
    config = page_config(settings)

    @router.get("/")
    @router.get("/ui")
    async def to_the_page() -> RedirectResponse:
        return RedirectResponse(PAGE)

    @router.get(PAGE)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html", headers=PAGE_HEADERS)

    @router.get("/ui/config.json")
    async def page_settings() -> dict[str, Any]:
        return config

    app.include_router(router)
    app.mount("/ui/static", StaticFiles(directory=STATIC), name="ui-static")
