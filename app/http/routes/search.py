"""``POST /v1/search``: ranked passages for a query, retrieval only, budgeted and traced; personal
data and secrets in the hits are redacted. ``k`` has its own limit (``RAGTIME_MAX_SEARCH_K``),
apart from the prompt's passage limit; ``source_prefix`` and ``kind`` filter the hits (422
naming the field for a malformed value or a file type the collection does not hold); ``mode``
searches by vector, by keyword (BM25) or both (default ``RAGTIME_SEARCH_MODE``)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from opentelemetry import trace

from app.http.body import openapi_body
from app.http.deps import (
    CurrentKey,
    LedgerDep,
    PipelineDep,
    SearchBody,
    SessionDep,
    SettingsDep,
    readable_collection,
)
from app.http.limits import check_text, resolve_count
from app.http.report import (
    budget_report,
    close_failed,
    close_request,
    degradations,
    search_hits,
    stages,
    success_outcome,
    timing_headers,
)
from app.http.schemas import SearchRequest, SearchResponse
from retrieval import SearchFilter
from tracing import current_trace_id

router = APIRouter(tags=["retrieval"])
ROUTE = "/v1/search"


@router.post(ROUTE, response_model=SearchResponse, openapi_extra=openapi_body(SearchRequest))
async def search(
    body: SearchBody,
    key: CurrentKey,
    ledger: LedgerDep,
    session: SessionDep,
    pipeline: PipelineDep,
    settings: SettingsDep,
) -> JSONResponse:
    check_text(body.query, field="query", settings=settings)
    k = resolve_count(body.k, field="k", default=settings.top_k, maximum=settings.max_search_k)
    collection = readable_collection(key, body.collection or settings.default_collection)
    search_filter = SearchFilter.of(body.source_prefix, body.kind)
    root = trace.get_current_span()
    mode = body.mode or settings.search_mode
    root.set_attributes({"ragtime.collection": collection, "ragtime.k": k, "ragtime.mode": mode})
    try:
        query = pipeline.query(body.query, collection, k, search_filter=search_filter, mode=mode)
        passages = await pipeline.retrieve(query, session)
    except BaseException as exc:
        close_failed(ledger, root, ROUTE, exc)
        raise
    close_request(ledger, root, ROUTE, success_outcome(ledger))
    response = SearchResponse(
        passages=search_hits(passages, root),
        trace_id=current_trace_id(),
        timings_ms=ledger.timings_ms,
        stages=stages(ledger),
        budget=budget_report(ledger),
        degradations=degradations(ledger),
    )
    return JSONResponse(response.model_dump(mode="json"), headers=timing_headers(ledger, root))
