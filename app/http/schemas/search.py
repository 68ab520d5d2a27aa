"""``POST /v1/search``: the query's body, its filters and search mode, and the hits it returns
(passages with their text, file type, page and OCR mark)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, StrictInt, StrictStr

from app.http.schemas.common import (
    BudgetedRequest,
    BudgetReport,
    DegradationOut,
    NonEmptyText,
    PassageOut,
    StageOut,
)
from retrieval import Passage


class SearchRequest(BudgetedRequest):
    query: NonEmptyText
    collection: NonEmptyText | None = None
    k: StrictInt | None = Field(
        None, ge=1, description="Passages to return; at most RAGTIME_MAX_SEARCH_K (100)."
    )
    source_prefix: StrictStr | None = Field(
        None, description="Only sources starting with this path (as hits show it)."
    )
    kind: StrictStr | list[StrictStr] | None = Field(
        None, description="Only chunks of this file type, or of one of these (`md`, `pdf`...)."
    )
    mode: Literal["dense", "keyword", "hybrid"] | None = Field(
        None,
        description="dense (vectors), keyword (BM25 over the words: exact identifiers, "
        "options, numbers), or hybrid (both, fused by reciprocal rank); default "
        "RAGTIME_SEARCH_MODE.",
    )


class SearchHit(PassageOut):
    text: str
    kind: str = Field("", description="The file type the chunk came from.")
    page: int | None = Field(None, description="1-based page of a paged format, else null.")
    ocr: bool = Field(False, description="Whether its text was read by OCR (a scan, an image).")

    @classmethod
    def from_passage(cls, passage: Passage) -> SearchHit:
        return cls(
            text=passage.text,
            kind=passage.kind,
            page=passage.page,
            ocr=passage.ocr,
            **cls.fields_of(passage),
        )


class SearchResponse(BaseModel):
    passages: list[SearchHit]
    trace_id: str
    timings_ms: dict[str, float]
    stages: list[StageOut] = Field(
        description="Each hop in the order it started: when, what it spent, what it was allocated."
    )
    budget: BudgetReport
    degradations: list[DegradationOut]
