"""What one upload may make ingest do: the body's size, what one file may inflate to, its pages,
rows, paragraphs and chunks, an image's pixels, the worker's time and memory, and how many
uploads are parsed at once."""

from __future__ import annotations

from pydantic import BaseModel, Field


class IngestLimitSettings(BaseModel):
    """The bounds of an upload (app/http/routes/collections.py, app/http/uploads.py) and of
    ingest."""

    max_upload_bytes: int = Field(
        8 * 1024 * 1024,
        ge=1024,
        description="Largest body of a document upload (POST /v1/collections/NAME/documents).",
    )
    # What one uploaded (or ingested) file may make ingest do; over one: 413 (422 for time),
    # naming the setting, and nothing of the upload is ingested.
    ingest_max_member_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="Bytes one member of a DOCX or XLSX inflates to."
    )
    ingest_max_inflated_bytes: int = Field(
        256 * 1024 * 1024,
        ge=1024,
        description="Bytes all members of one DOCX or XLSX inflate to together.",
    )
    ingest_max_pages: int = Field(2_000, ge=1, description="Pages of one PDF.")
    ingest_max_rows: int = Field(
        100_000, ge=1, description="Rows of one spreadsheet (an XLSX's sheets together, or a CSV)."
    )
    ingest_max_paragraphs: int = Field(
        200_000, ge=1, description="Paragraphs (text blocks, table rows) of one document."
    )
    ingest_max_chunks: int = Field(20_000, ge=1, description="Chunks one document makes.")
    ingest_max_image_pixels: int = Field(
        40_000_000,
        ge=10_000,
        description="Pixels of an image (a TIFF's frame) to OCR, read from its header before it "
        "is decoded; a scanned PDF page is rendered within it.",
    )
    ingest_max_parse_s: float = Field(
        60.0,
        gt=0,
        description="Seconds an upload's worker may spend parsing one file before it is killed "
        "(422).",
    )
    ingest_max_memory_mb: int = Field(
        2048,
        ge=128,
        description="Resident memory an upload's worker process may use (model included) before "
        "it is killed (413).",
    )
    ingest_workers: int = Field(
        2,
        ge=1,
        le=64,
        description="Uploads parsed and embedded at once, each in a worker process of its own; "
        "more wait their turn.",
    )
