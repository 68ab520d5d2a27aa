"""One answer's life at the HTTP boundary, shared by the routes that answer questions
(``POST /v1/ask`` and the OpenAI-compatible ``POST /v1/chat/completions``).

A route resolves what it was asked (``asked``: the limits checked, the defaults applied, the
root span labelled), then either waits for the whole answer (``answer``) or starts a stream
(``AnswerStream.start``). A stream that sends its evidence first begins once the passages are
ready (everything before, retrieval and the prompt, fails as a plain HTTP error, and a failure
after is the stream's error event); one that does not begins once its first token has come, so
that the backend starting fails as a plain HTTP error too. Each closes the request once
(``app.http.report.close_request``): as it ended, failed, or was cancelled by a client that went
away. The answer's first token is stamped on the request's ledger as its first text comes (the
model's, generation stamped as it streamed; an answer from the passages comes whole), for its
report. Only the wire format is the route's own.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass

import anyio
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode
from starlette.requests import Request

from app.frontdoor.shutdown import Shutdown
from app.http.disconnects import while_connected
from app.http.errors import STREAM_FAILURES, ShuttingDown
from app.http.limits import check_text, resolve_count
from app.http.report import (
    answer_report,
    close_failed,
    close_request,
    count_first_token,
    evidence,
    success_outcome,
    timing_headers,
    traceparent,
    ttft_target_ms,
)
from app.http.schemas import Citation, Report
from app.pipeline import Pipeline
from app.pipeline.events import (
    AnswerDelta,
    AnswerDone,
    AnswerEvent,
    AnswerOutcome,
    AnswerReplaced,
    PipelineEvent,
    Prepared,
)
from app.settings import AnswerMode, Settings
from tracing import BudgetLedger
from tracing.budget import BudgetSession


@dataclass(frozen=True)
class Asked:
    """A question as the pipeline takes it, limits checked and defaults applied."""

    question: str
    collection: str
    top_k: int
    max_output_tokens: int | None = None
    """The caller's cap on answer tokens (the plan's own cap still applies)."""
    answer_mode: AnswerMode | None = None
    """Who the caller asks to write the answer (None: the service's default)."""


#: Where a stream that cannot take back what it sent (a chat completion's) gives the answer that
#: replaces it.
REPLACED_NOTE = "\n\n(Not borne out by the documents. From them instead:)\n"


@dataclass(frozen=True)
class Replaced:
    """A stream's answer is this text instead of what was sent: ``auto`` answered from the
    passages after the model's answer fell short."""

    text: str


@dataclass(frozen=True)
class Evidence:
    """The passages an answer is about to be written from, with their labels, before its first
    token: what a reader can check while the model writes."""

    citations: list[Citation]


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
    answer_mode: AnswerMode | None = None,
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
    return Asked(question, collection, top_k, max_output_tokens, answer_mode)


def _answer(
    pipeline: Pipeline, question: Asked, session: BudgetSession
) -> AsyncGenerator[PipelineEvent, None]:
    return pipeline.answer(
        question.question,
        question.collection,
        question.top_k,
        session,
        max_output_tokens=question.max_output_tokens,
        mode=question.answer_mode,
    )


async def prepared_from(events: AsyncGenerator[PipelineEvent, None]) -> Prepared:
    """The answer's first event: the question prepared (its passages and prompt)."""
    first = await anext(events)
    assert isinstance(first, Prepared), "an answer begins with its Prepared"
    return first


async def answer(
    pipeline: Pipeline,
    question: Asked,
    session: BudgetSession,
    ledger: BudgetLedger,
    route: str,
    request: Request,
) -> Finished:
    """The whole answer, within the request's budget (its ``session``, over its ``ledger``);
    the request is closed whether it comes or fails. A client that disconnects stops its
    generation (``ClientGone``, 499, closed as cancelled)."""
    root = trace.get_current_span()
    try:
        async with aclosing(_answer(pipeline, question, session)) as events:
            prepared = await prepared_from(events)
            collected = collect(events, ledger)
            text, outcome = await while_connected(request, collected, what="its answer")
    except BaseException as exc:
        close_failed(ledger, root, route, exc)
        raise
    close_request(ledger, root, route, success_outcome(ledger, outcome.finish_reason))
    count_first_token(
        route, outcome.ttft_ms, ttft_target_ms(ledger, pipeline.settings.ttft_target_ms)
    )
    report = answer_report(prepared, outcome, ledger)
    return Finished(text, report, timing_headers(ledger, root))


async def collect(
    events: AsyncGenerator[PipelineEvent, None], ledger: BudgetLedger
) -> tuple[str, AnswerOutcome]:
    """The whole answer's text and how it ended."""
    parts: list[str] = []
    async for event in events:
        first_text(event, ledger)
        if isinstance(event, AnswerDone):
            return "".join(parts), event.outcome
        if isinstance(event, AnswerDelta):
            parts.append(event.text)
        elif isinstance(event, AnswerReplaced):
            parts = [event.text]
    raise RuntimeError("the answer ended without its AnswerDone")


def first_text(event: PipelineEvent, ledger: BudgetLedger) -> None:
    """Stamp the answer's first token on ``ledger`` as its first text comes (a stamp made
    earlier, by generation, stands)."""
    if isinstance(event, AnswerDelta | AnswerReplaced) and event.text:
        ledger.first_token()


async def _next_answer_event(
    events: AsyncGenerator[PipelineEvent, None], ledger: BudgetLedger
) -> AnswerEvent:
    """The next event after the ``Prepared``: an ``AnswerDelta`` or the ``AnswerDone``."""
    event = await anext(events)
    assert not isinstance(event, Prepared), "an answer has one Prepared, its first event"
    first_text(event, ledger)
    return event


class Drain:
    """A stream's view of the server stopping (``app.frontdoor.shutdown.Shutdown``): once it
    begins, the stream may go on until the grace ends, less a margin to send its last event.
    ``started`` is for sse-starlette (its ``shutdown_event``: it sets it when it sees the stop
    itself)."""

    MARGIN_S = 0.25

    def __init__(self, shutdown: Shutdown) -> None:
        self.shutdown = shutdown
        self.grace_s = shutdown.grace_s
        self.started = anyio.Event()

    async def next(
        self, events: AsyncGenerator[PipelineEvent, None], ledger: BudgetLedger
    ) -> AnswerEvent | None:
        """The next event, or None when the shutdown's grace runs out first (the answer, and
        its backend, are cancelled where they wait). It runs in the caller's task: a task and
        a waiter per event cost about 65 µs of CPU a token (measured with 64-token answers)."""
        try:
            async with self.shutdown.until_grace_ends(self.MARGIN_S) as grace:
                return await _next_answer_event(events, ledger)
        except TimeoutError:
            if grace.expired():
                return None
            raise


class AnswerStream:
    """An answer being streamed (``start``).

    ``items()`` yields the ``Evidence`` first when the stream was started with it, then the text
    deltas, then one ``Finished`` (whose text is empty: the deltas were the text). A failure
    once the stream has begun (one of ``STREAM_FAILURES``) closes the request as failed and is
    raised for the route to send as its error event. Closing ``items()`` early (a client that
    went away) stops the backend and closes the request as cancelled. When the server shuts
    down, the stream goes on for the grace period (``drain``; the route gives ``drain.started``
    and ``drain.grace_s`` to sse-starlette), then stops the backend and raises ``ShuttingDown``
    for the route to send as its last event.
    """

    def __init__(
        self,
        first: AnswerEvent | Evidence,
        events: AsyncGenerator[PipelineEvent, None],
        prepared: Prepared,
        ledger: BudgetLedger,
        root: Span,
        route: str,
        drain: Drain,
        ttft_target_ms: float | None = None,
    ) -> None:
        self.drain = drain
        self.ttft_target_ms = ttft_target_ms
        """The first-token target the answer is held to (``report.ttft_target_ms``)."""
        self._first = first
        self._events = events
        self._prepared = prepared
        self._ledger = ledger
        self._root = root
        self._route = route

    @classmethod
    async def start(
        cls,
        pipeline: Pipeline,
        question: Asked,
        session: BudgetSession,
        ledger: BudgetLedger,
        route: str,
        shutdown: Shutdown,
        *,
        evidence_first: bool = False,
    ) -> AnswerStream:
        """Prepare, and unless ``evidence_first``, wait for the first event; a failure until
        then closes the request and raises, to be answered as a plain HTTP error. ``shutdown``
        is the server's stop, which ends the stream at its grace (``Drain``)."""
        root = trace.get_current_span()
        events = _answer(pipeline, question, session)
        try:
            prepared = await prepared_from(events)
            first: AnswerEvent | Evidence
            if evidence_first:
                first = Evidence(evidence(prepared))
            else:
                first = await _next_answer_event(events, ledger)
        except BaseException as exc:
            await events.aclose()
            close_failed(ledger, root, route, exc)
            raise
        target = ttft_target_ms(ledger, pipeline.settings.ttft_target_ms)
        return cls(first, events, prepared, ledger, root, route, Drain(shutdown), target)

    @property
    def trace_id(self) -> str:
        """The request's trace id (32 hex digits; "" when it is not recorded): a stream's first
        event carries it."""
        context = self._root.get_span_context()
        return format(context.trace_id, "032x") if context.is_valid else ""

    @property
    def headers(self) -> dict[str, str]:
        """What a stream's response says at once: the request's ``traceparent``."""
        return traceparent(self._root)

    async def items(self) -> AsyncGenerator[str | Evidence | Replaced | Finished, None]:
        events, ledger, root, route = self._events, self._ledger, self._root, self._route
        closed = False
        try:
            event: AnswerEvent | Evidence | None = self._first
            while not isinstance(event, AnswerDone):
                if isinstance(event, Evidence):
                    yield event
                elif isinstance(event, AnswerReplaced):
                    yield Replaced(event.text)
                elif event is not None:
                    yield event.text
                event = await self.drain.next(events, ledger)
                if event is None:  # the server is going down and the grace is over
                    close_request(ledger, root, route, "cancelled")
                    closed = True
                    raise ShuttingDown()
            await events.aclose()
            outcome = event.outcome
            close_request(ledger, root, route, success_outcome(ledger, outcome.finish_reason))
            count_first_token(route, outcome.ttft_ms, self.ttft_target_ms)
            closed = True
            report = answer_report(self._prepared, outcome, ledger)
            yield Finished("", report, timing_headers(ledger, root))
        except STREAM_FAILURES as exc:
            # The status line said 200: the trace must say the stream failed.
            if getattr(exc, "status_code", 500) >= 500 and root.is_recording():
                root.set_status(Status(StatusCode.ERROR, str(exc)))
            if not closed:
                close_failed(ledger, root, route, exc)
                closed = True
            raise
        finally:
            # A client that went away cancels us here: closing ``events`` stops the backend,
            # and the pipeline gives back the generation time held at the target even if the
            # answer never began (gone right after the evidence).
            await events.aclose()
            if not closed:
                close_request(ledger, root, route, "cancelled")
