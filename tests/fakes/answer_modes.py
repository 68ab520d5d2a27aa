"""A stand-in for ragtime's ``POST /v1/ask`` with answer modes, as an ``httpx.MockTransport``
handler, for the tests of ``ragtime eval answers``' client: it answers in the mode asked for,
and says which mode wrote each answer and whether the question was answerable.

The stream is the real route's (``app/http/routes/ask.py``: ``token`` events, byte for byte as
``token_event`` writes them, then one ``done`` event whose data is the report). The fields it
adds follow the contract the answer modes are built to (issue of the answer modes): the body's
``answer_mode`` (``generate``, ``extract``, ``auto``; absent: the server's setting, here
generate), and the report's ``answer_mode`` (``generate``, ``extract`` or ``abstain``) and
``answerable`` (false when no passage was close enough; the answer is then "The documents do
not answer this."). ``knows_modes=False`` is a server from before them: it refuses the field
with 422, as ``BudgetedRequest`` refuses any field it does not know, and reports neither.

Its answers, by the question: one about Django has no close passage; one about exceptions is
written as a loop that runs to the token cap (``auto`` streams it, then falls back to extract
for it with a ``replace`` event before ``done``, as the route does); any other is answered right
by both modes.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

ABSTAINED = "The documents do not answer this."
LOOPING = "Use a with block [1].\n\n" * 12


class AnswerModesServer:
    """The handler: ``httpx.MockTransport(AnswerModesServer())``. ``bodies`` holds every ask's
    body, ``urls`` and ``keys`` where each request went and the key it carried."""

    def __init__(self, *, knows_modes: bool = True) -> None:
        self.knows_modes = knows_modes
        self.bodies: list[dict[str, Any]] = []
        self.urls: list[str] = []
        self.keys: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.urls.append(str(request.url))
        self.keys.append(request.headers.get("authorization", ""))
        if request.url.path.endswith("/documents"):
            return httpx.Response(201, json={"chunks": request.content.count(b'name="file"')})
        body = json.loads(request.content)
        self.bodies.append(body)
        if "answer_mode" in body and not self.knows_modes:
            message = "body.answer_mode: Extra inputs are not permitted"
            return httpx.Response(422, json={"error": {"type": "invalid", "message": message}})
        mode = body.get("answer_mode") or "generate"
        text, report = self.answer(body["question"], mode)
        replaced = None
        if report.get("answer_mode") == "extract" and mode == "auto":
            text, replaced = LOOPING, text  # the model's answer streamed first
        events = [
            b"event: token\r\ndata: " + json.dumps({"text": word + " "}).encode() + b"\r\n\r\n"
            for word in text.split(" ")
        ]
        if replaced is not None:
            data = json.dumps({"text": replaced}).encode()
            events.append(b"event: replace\r\ndata: " + data + b"\r\n\r\n")
        events.append(b"event: done\r\ndata: " + json.dumps(report).encode() + b"\r\n\r\n")
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=b"".join(events)
        )

    def answer(self, question: str, mode: str) -> tuple[str, dict[str, Any]]:
        """The answer's text and its report."""
        finish, wrote, answerable = "stop", mode, True
        if "Django" in question:
            text, wrote, answerable = ABSTAINED, "abstain", False
        elif mode == "extract" or (mode == "auto" and "exception" in question):
            text, wrote = "Write it as name=value. Use try and except ValueError.", "extract"
        elif "exception" in question:
            text, finish, wrote = LOOPING, "length", "generate"
        else:
            text, wrote = "Write it as name=value [1]. Use sorted(xs) or break [1].", "generate"
        report: dict[str, Any] = {
            "citations": [],
            "grounded": wrote == "generate" and finish == "stop",
            "degradations": [],
            "finish_reason": finish,
            "model": "stand-in-model" if wrote == "generate" else "",
            "budget": {"exceeded": False},
        }
        if self.knows_modes:
            report |= {"answer_mode": wrote, "answerable": answerable}
        elif not answerable:
            text = "I don't know."
        return text, report
