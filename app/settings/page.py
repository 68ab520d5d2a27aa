"""The page ragtime serves to people (``app/ui``): whether it is served, and where its trace
links point."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator


class PageSettings(BaseModel):
    """The page at ``/ui``."""

    ui: bool = Field(
        True,
        description="Serve the page at /ui (and send / there): ask, search, the waterfall. "
        "Its files ship in the package; it reaches nothing but this server.",
    )
    jaeger_url: str | None = Field(
        None,
        description="Jaeger's UI (http://localhost:16686): the page links each request's "
        "trace id to <jaeger_url>/trace/<id>; empty, the id is shown without a link.",
    )

    @field_validator("jaeger_url")
    @classmethod
    def _check_jaeger_url(cls, value: str | None) -> str | None:
        if not value:
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"jaeger_url must be an http(s) URL, got {value!r}")
        return value.rstrip("/")
