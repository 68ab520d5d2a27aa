"""Admission: how many question requests a process holds, where and how it decides to take one
on, and what a refusal tells the client."""

from __future__ import annotations

from pydantic import BaseModel, Field


class AdmissionSettings(BaseModel):
    """The bounds, the margin and the place of the admission decision; the 503's Retry-After."""

    retry_after_s: int = Field(5, ge=1, description="Retry-After sent with 503 answers.")
    max_in_flight: int = Field(
        256,
        ge=1,
        description="A hard bound on the question requests (/v1/ask, /v1/chat/completions, "
        "/v1/search) a process holds at once, plus the decoding slots of the remote generation "
        "servers serving now; more are refused at once (503 overloaded). Below it, a request is "
        "admitted when it is predicted to finish within its budget (app.frontdoor.gate).",
    )
    admit_as_parsed: bool = Field(
        True,
        description="Decide admission in the HTTP protocol as a question request is parsed, "
        "before any task is made for it, so a refusal does not wait behind the work admitted "
        "before it (app.frontdoor.protocol; `ragtime serve` only). Off: the middleware decides, "
        "in the request's first step.",
    )
    serve_read_ahead: bool = Field(
        False,
        description="`ragtime serve`, the read-ahead plug-in: a thread of each process accepts "
        "and reads its connections ahead of the event loop and decides question requests' "
        "admission there, so that a refusal is sent as its request arrives, not once the loop, "
        "busy with the work it admitted, gets round to reading it (app.frontdoor.read_ahead). "
        "Needs RAGTIME_ADMIT_AS_PARSED, and Linux. Off (the default): the loop reads every "
        "connection, and its HTTP protocol decides.",
    )
    admission_margin: float = Field(
        0.1,
        ge=0.0,
        lt=1.0,
        description="The share of each budget admission keeps free of predicted work: a "
        "request is admitted when it is predicted to finish this much before its deadline "
        "(the answer's last bytes still have to reach the client).",
    )
    max_queued_per_slot: int = Field(
        64,
        ge=0,
        description="A hard bound on the answers that may wait per decoding slot of a generation "
        "target; more are refused at arrival (503 overloaded). Below it, an answer is refused "
        "when the predicted wait at the target leaves no room for its smallest plan.",
    )
