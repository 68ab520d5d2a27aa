"""The collections routes: the collections a key may read (``GET /v1/collections``), and
documents uploaded over HTTP, as JSON text or files, with what their ingest made of them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from app.http.schemas.common import NonEmptyText


class CollectionOut(BaseModel):
    name: str
    chunks: int
    default: bool = Field(
        False, description="Whether a request that names no collection reads this one."
    )


class CollectionList(BaseModel):
    """The collections the request's key may read (others are never named)."""

    collections: list[CollectionOut]


class DocumentText(BaseModel):
    """One document sent as JSON text; ``source`` names it (its suffix gives its format) and a
    later upload of the same source replaces it."""

    model_config = ConfigDict(extra="forbid")

    source: NonEmptyText = Field(description="File name, e.g. notes.md; its suffix is its type.")
    text: StrictStr


class IngestFailure(BaseModel):
    source: str
    reason: str


class IngestCopy(BaseModel):
    source: str
    of: str = Field(description="The source it is a byte-identical copy of.")


class IngestResponse(BaseModel):
    collection: str
    files: int = Field(description="Documents ingested (copies among them).")
    chunks: int = Field(description="Chunks they made.")
    sources: list[str] = Field(
        description="The sources ingested, as searches will name them: an e-mail's "
        "attachments follow it, each named `<e-mail>#<file name>`."
    )
    failures: list[IngestFailure] = Field(
        description="Documents (or attachments) that could not be ingested."
    )
    copies: list[IngestCopy] = Field(
        default_factory=list,
        description="Documents recorded as byte-identical copies of a source the collection "
        "holds (or of another document of the upload): no failure; searchable under both names.",
    )
