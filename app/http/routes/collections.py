"""``GET /v1/collections``: the collections the key may read; ``POST
/v1/collections/{name}/documents``: documents uploaded into one (the ``ingest`` scope).

A key writes only to collections it may read (every one, or those it was created with: a
collection it names may not exist yet, and its first upload makes it). Any other name gets the
404 of an unknown collection, whether it exists or not, so an upload learns nothing of other
tenants. Upload limits and formats: ``app.http.uploads``.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.http.deps import CurrentKey, IngestKey, ServicesDep, SettingsDep, readable_collection
from app.http.errors import InvalidField
from app.http.schemas import (
    CollectionList,
    CollectionOut,
    DocumentText,
    IngestCopy,
    IngestFailure,
    IngestResponse,
)
from app.http.uploads import check_collection_name, ingest_documents, read_documents

router = APIRouter(tags=["collections"])


@router.get("/v1/collections", response_model=CollectionList)
async def list_collections(key: CurrentKey, services: ServicesDep) -> CollectionList:
    """The collections this key may read, with their sizes in chunks, and which is the default
    (when the key may read it)."""
    held = services.store.collections()
    default = services.settings.default_collection
    return CollectionList(
        collections=[
            CollectionOut(name=name, chunks=held[name], default=name == default)
            for name in key.readable(held)
        ]
    )


UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "file": {"type": "array", "items": {"type": "string", "format": "binary"}}
                    },
                }
            },
            "application/json": {"schema": DocumentText.model_json_schema()},
        },
    }
}


@router.post(
    "/v1/collections/{name}/documents",
    status_code=201,
    response_model=IngestResponse,
    openapi_extra=UPLOAD_BODY,
)
async def upload_documents(
    name: str,
    request: Request,
    key: IngestKey,
    services: ServicesDep,
    settings: SettingsDep,
) -> JSONResponse:
    """Ingest the uploaded documents into collection ``name`` (a document uploaded again
    replaces its chunks; unchanged, it is not embedded again). 413 over
    ``RAGTIME_MAX_UPLOAD_BYTES`` or a document over one of the ``RAGTIME_INGEST_MAX_*`` limits
    (422 for the time to parse one), 415 for a type not ingested, 422 for a body or document
    that cannot be read; 499 when the client goes away before the ingest ends (it is
    cancelled)."""
    collection = readable_collection(key, check_collection_name(name))
    documents = await read_documents(request, settings.max_upload_bytes)
    assert services.uploads is not None
    report = await ingest_documents(
        documents,
        collection,
        request=request,
        settings=settings,
        embedder=services.embedders_for(collection),
        store=services.store,
        workers=services.uploads,
    )
    failures = [IngestFailure(source=s, reason=r) for s, r in report.failures]
    if not (report.files or report.attachments or report.unchanged or report.copies):
        reasons = "; ".join(f"{f.source}: {f.reason}" for f in failures) or "nothing to ingest"
        raise InvalidField("documents", f"no document could be ingested ({reasons})")
    failed = {f.source for f in failures}
    sources = [
        source
        for d in documents
        for source in (d.source, *[a for a, m in report.attachments if m == d.source])
        if source not in failed
    ]
    response = IngestResponse(
        collection=collection,
        files=report.files + len(report.unchanged) + len(report.copies),
        chunks=report.chunks,
        sources=sources,
        failures=failures,
        copies=[IngestCopy(source=s, of=o) for s, o in report.copies],
    )
    return JSONResponse(response.model_dump(mode="json"), status_code=201)
