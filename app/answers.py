"""One answer's life at the HTTP boundary, shared by the routes that answer questions
(``POST /v1/ask`` and the OpenAI-compatible ``POST /v1/chat/completions``).

A route resolves what it was asked (``asked``: the limits checked, the defaults applied, the
root span labelled), then either waits for the whole answer (``answer``) or starts a stream
(``AnswerStream.start``) whose first event has come, so that everything before the first token
(retrieval, the prompt, the backend starting) fails as a plain HTTP error. Each closes the
request once (``app.report.close_request``): as it ended, failed, or was cancelled by a client
that went away. Only the wire format is the route's own.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.trace import Span

from app.config import Settings
from app.limits import check_text, resolve_count
from app.pipeline import AnswerDone, AnswerEvent, AnswerOutcome, Pipeline, Prepared
from app.report import answer_report, close_request, error_outcome, success_outcome, timing_headers
from app.schemas import Report
from inference import InferenceError
from tracing import BudgetLedger


@dataclass(frozen=True)
class Asked:
    """A question as the pipeline takes it, limits checked and defaults applied."""

    question: str
    collection: str
    top_k: int
    max_output_tokens: int | None = None
    """The caller's cap on answer tokens (the plan's own cap still applies)."""


@dataclass(frozen=True)
class Finished:
    """A whole answer: its text, its report, and the ``Server-Timing``/``traceparent`` headers."""

    text: str
    report: Report
    headers: dict[str, str]


def asked(
    settings: Settings,
    question: str,
    *,
    collection: str | None,
    top_k: int | None,
    stream: bool,
    max_output_tokens: int | None = None,
    question_field: str = "question",
) -> Asked:
    """The question checked against the configured limits (422, naming ``question_field``), and
    the request's root span labelled with what it asks."""
    question = check_text(question, field=question_field, settings=settings)
    top_k = resolve_count(top_k, field="top_k", default=settings.top_k, maximum=settings.max_top_k)
    collection = collection or settings.default_collection
    root = trace.get_current_span()
    root.set_attributes(
        {"ragtime.collection": collection, "ragtime.top_k": top_k, "ragtime.stream": stream}
    )
    if settings.record_content:
        root.set_attribute("ragtime.question", question)
    return Asked(question, collection, top_k, max_output_tokens)


async def _prepare(pipeline: Pipeline, question: Asked, ledger: BudgetLedger) -> Prepared:
    return await pipeline.prepare(
        question.question,
        question.collection,
        question.top_k,
        ledger,
        max_output_tokens=question.max_output_tokens,
    )


async def answer(pipeline: Pipeline, question: Asked, ledger: BudgetLedger, route: str) -> Finished:
    """The whole answer; the request is closed whether it comes or fails."""
    root = trace.get_current_span()
    try:
        prepared = await _prepare(pipeline, question, ledger)
        async with aclosing(pipeline.generate(prepared, ledger)) as events:
            text, outcome = await collect(events)
    except BaseException as exc:
        close_request(ledger, root, route, error_outcome(exc))
        raise
    close_request(ledger, root, route, success_outcome(ledger, outcome.finish_reason))
    model = pipeline.services.backend.model
    report = answer_report(prepared, outcome, ledger, model)
    return Finished(text, report, timing_headers(ledger, root))


async def collect(events: AsyncGenerator[AnswerEvent, None]) -> tuple[str, AnswerOutcome]:
    """The whole answer's text and how it ended."""
    parts: list[str] = []
    async for event in events:
        if isinstance(event, AnswerDone):
            return "".join(parts), event.outcome
        parts.append(event.text)
    raise RuntimeError("the answer ended without its AnswerDone")


class AnswerStream:
    """An answer being streamed, its first event already come (``start``).

    ``items()`` yields the text deltas, then one ``Finished`` (whose text is empty: the deltas
    were the text). A failure after the first token closes the request as failed and raises the
    ``InferenceError`` for the route to send as its error event. Closing ``items()`` early (a
    client that went away) stops the backend and closes the request as cancelled.
    """

    def __init__(
        self,
        first: AnswerEvent,
        events: AsyncGenerator[AnswerEvent, None],
        prepared: Prepared,
        ledger: BudgetLedger,
        root: Span,
        route: str,
        model: str,
    ) -> None:
        self._first = first
        self._events = events
        self._prepared = prepared
        self._ledger = ledger
        self._root = root
        self._route = route
        self._model = model

    @classmethod
    async def start(
        cls, pipeline: Pipeline, question: Asked, ledger: BudgetLedger, route: str
    ) -> AnswerStream:
        """Prepare and wait for the first event; a failure until then closes the request and
        raises, to be answered as a plain HTTP error."""
        root = trace.get_current_span()
        try:
            prepared = await _prepare(pipeline, question, ledger)
            events = pipeline.generate(prepared, ledger)
            first = await anext(events)
        except BaseException as exc:
            close_request(ledger, root, route, error_outcome(exc))
            raise
        model = pipeline.services.backend.model
        return cls(first, events, prepared, ledger, root, route, model)

    async def items(self) -> AsyncGenerator[str | Finished, None]:
        event, events, ledger, root, route = (
            self._first,
            self._events,
            self._ledger,
            self._root,
            self._route,
        )
        closed = False
        try:
            while not isinstance(event, AnswerDone):
                yield event.text
                event = await anext(events)
            await events.aclose()
            outcome = event.outcome
            close_request(ledger, root, route, success_outcome(ledger, outcome.finish_reason))
            closed = True
            report = answer_report(self._prepared, outcome, ledger, self._model)
            yield Finished("", report, timing_headers(ledger, root))
        except InferenceError as exc:
            close_request(ledger, root, route, error_outcome(exc))
            closed = True
            raise
        finally:
            # A client that went away cancels us here: closing ``events`` stops the backend.
            await events.aclose()
            if not closed:
                close_request(ledger, root, route, "cancelled")
