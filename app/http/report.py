"""What every answer reports besides its text: citations, quarantined passages, timings, budget,
degradations; and the hits of a search, with personal data and secrets redacted."""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from opentelemetry.trace import Span

from app.http.schemas import (
    AnswerBudgetReport,
    BudgetReport,
    Citation,
    DegradationOut,
    QuarantinedOut,
    Report,
    SearchHit,
    StageOut,
    UsageOut,
)
from app.pipeline.events import AnswerOutcome, Prepared
from app.safety.redaction import redact, redaction_attributes
from retrieval import Passage
from tracing import BudgetLedger, current_trace_id
from tracing import metrics as tracing_metrics
from tracing.budget import BudgetInfeasible, StageName


def budget_report(ledger: BudgetLedger) -> BudgetReport:
    return BudgetReport(**ledger.summary())


def answer_budget(ledger: BudgetLedger) -> AnswerBudgetReport:
    """An answer's budget report: the totals, and when its first token came (``ttft_ms``)."""
    ttft_ms = None if ledger.ttft_ms is None else round(ledger.ttft_ms, 3)
    return AnswerBudgetReport(**ledger.summary(), ttft_ms=ttft_ms)


def stages(ledger: BudgetLedger) -> list[StageOut]:
    """The request's waterfall: each stage's start, spent and allocated ms, and whether it ran
    past its allocation."""
    return [
        StageOut(
            stage=r.stage,
            start_ms=r.start_ms,
            spent_ms=r.spent_ms,
            allocated_ms=r.allocated_ms,
            exceeded=r.exceeded,
        )
        for r in ledger.stages()
    ]


def degradations(ledger: BudgetLedger) -> list[DegradationOut]:
    return [DegradationOut(**d.as_dict()) for d in ledger.degradations]


#: Passage texts kept redacted: each answer sends each of its passages twice (its evidence, then
#: its citations), and the same passages come back for other questions. Redaction's patterns
#: over a passage were 5% of a null-backend server's CPU with fresh questions (issue 60).
REDACTED_PASSAGES = 4096


@functools.lru_cache(maxsize=REDACTED_PASSAGES)
def redacted_passage_text(text: str) -> str:
    """A passage's text as a reader gets it: ``redact``'s, worked out once while kept."""
    return redact(text)


def citation_fields(passage: Passage) -> dict[str, Any]:
    """A cited passage's fields, its text with personal data and secrets redacted as a search
    hit's is (so that a reader can check the citation against it)."""
    return Citation.fields_of(passage) | {"text": redacted_passage_text(passage.text)}


def citations(prepared: Prepared, outcome: AnswerOutcome) -> list[Citation]:
    """Every passage the prompt held, in label order, marked if the answer cites it, and how
    that was found: its label in the answer (``by: model``) or attribution (``attributed``)."""
    found = outcome.attribution
    cited = found.cited if found is not None else {}
    by = found.by if found is not None else None
    return [
        Citation(
            label=p.label,
            cited=p.label in cited,
            by=by if p.label in cited else None,
            support=cited.get(p.label),
            **citation_fields(prepared.passages[p.label - 1]),
        )
        for p in prepared.prompt.passages
    ]


def evidence(prepared: Prepared) -> list[Citation]:
    """The passages the prompt holds, in label order, before the answer: none cited yet."""
    return [
        Citation(label=p.label, cited=False, **citation_fields(prepared.passages[p.label - 1]))
        for p in prepared.prompt.passages
    ]


def quarantined(prepared: Prepared) -> list[QuarantinedOut]:
    """The passages the screen kept out of the prompt, with the rules they tripped."""
    return [
        QuarantinedOut(reasons=list(q.reasons), **QuarantinedOut.fields_of(q.passage))
        for q in prepared.quarantined
    ]


def search_hits(passages: Sequence[Passage], span: Span) -> list[SearchHit]:
    """The hits of a search, personal data and secrets redacted from their text, title and
    section (``app.safety.redaction``), counted by kind on ``span``."""
    counts: Counter[str] = Counter()
    hits = []
    for passage in passages:
        hit = SearchHit.from_passage(passage)
        hit.text = redact(hit.text, counts)
        hit.title = redact(hit.title, counts)
        hit.section = redact(hit.section, counts)
        hits.append(hit)
    if span.is_recording():
        span.set_attributes(redaction_attributes(counts, "ragtime.search"))
    return hits


def close_request(
    ledger: BudgetLedger,
    root: Span,
    route: str,
    outcome: str,
    error: BaseException | None = None,
) -> None:
    """Write the totals on the request's root span; count its outcome, the budget it carried
    and, once, whether it broke it (``budget_breach``); ``error``: what it failed with."""
    ledger.annotate(root)
    if root.is_recording():
        root.set_attribute("ragtime.outcome", outcome)
    tracing_metrics.REQUEST_OUTCOMES.labels(route=route, outcome=outcome).inc()
    if outcome == "rejected":  # the caller's error: no budget was at stake
        return
    tracing_metrics.REQUEST_BUDGET_SECONDS.labels(route=route).observe(ledger.budget_ms / 1000.0)
    breach = budget_breach(ledger, error)
    if breach is not None:
        tracing_metrics.BUDGET_EXCEEDED.labels(route=route, kind=breach).inc()


def close_failed(ledger: BudgetLedger, root: Span, route: str, error: BaseException) -> None:
    """``close_request`` for a request that failed with ``error``."""
    close_request(ledger, root, route, error_outcome(error), error)


def budget_breach(ledger: BudgetLedger, error: BaseException | None = None) -> str | None:
    """How an admitted request broke its budget, as its caller felt it: ``504``, answered 504
    (its deadline passed with its work still running, or no plan fit what retrieval left);
    ``late``, it ended after its budget ran out. None: it kept to its budget, or it was refused
    at the door (``refused_at_the_door``)."""
    if error is not None and getattr(error, "status_code", None) == 504:
        return None if refused_at_the_door(ledger, error) else "504"
    return "late" if ledger.exceeded else None


def refused_at_the_door(ledger: BudgetLedger, error: BaseException) -> bool:
    """Whether ``error`` is admission's 504 for a budget no plan can meet: raised as the
    request's question is read (``BudgetSession.ask``), when no stage but the key check has
    run. Anyone may send such a budget; it is counted as a refusal
    (``ragtime_admission_refused_total``), as the error-ratio alert leaves it out."""
    return isinstance(error, BudgetInfeasible) and set(ledger.timings_ms) <= {StageName.AUTH}


def ttft_target_ms(ledger: BudgetLedger, service_ms: float) -> float | None:
    """The first-token target a request's answer is held to, as its plan was: its own
    (``ttft_target_ms``), else the service's (``RAGTIME_TTFT_TARGET_MS``, ``service_ms``; 0:
    none); None where there is none."""
    return ledger.ttft_target_ms or service_ms or None


def count_first_token(route: str, ttft_ms: float | None, target_ms: float | None) -> None:
    """An answer's first token against its target (``ragtime_ttft_target_ratio``), where it
    had both."""
    if ttft_ms is not None and target_ms:
        tracing_metrics.TTFT_TARGET_RATIO.labels(route=route).observe(ttft_ms / target_ms)


def success_outcome(ledger: BudgetLedger, finish_reason: str = "stop") -> str:
    if finish_reason == "deadline":
        return "deadline"
    return "degraded" if ledger.degradations else "ok"


def error_outcome(exc: BaseException) -> str:
    """ok | degraded | rejected (4xx) | failed (5xx) | deadline (504) | cancelled."""
    status = getattr(exc, "status_code", 500)
    if isinstance(exc, asyncio.CancelledError | GeneratorExit) or status == 499:
        return "cancelled"
    if status == 504:
        return "deadline"
    return "rejected" if status < 500 else "failed"


def server_timing(ledger: BudgetLedger) -> str:
    """``Server-Timing``: each stage as the waterfall has it (its duration; what it was
    allocated, and whether it ran past that, as its description), then the total."""
    parts = [
        f'{r.stage};dur={r.spent_ms:.1f};desc="{r.allocated_ms:.1f} ms allocated'
        f'{", exceeded" if r.exceeded else ""}"'
        for r in ledger.stages()
    ]
    parts.append(f"total;dur={ledger.spent_ms:.1f}")
    return ", ".join(parts)


def traceparent(root: Span) -> dict[str, str]:
    """The ``traceparent`` header of the request's root span (none when it is not recorded)."""
    context = root.get_span_context()
    if not context.is_valid:
        return {}
    ids = f"{context.trace_id:032x}-{context.span_id:016x}"
    return {"traceparent": f"00-{ids}-{int(context.trace_flags):02x}"}


def timing_headers(ledger: BudgetLedger, root: Span) -> dict[str, str]:
    """``Server-Timing`` (``server_timing``) and the ``traceparent``."""
    return {"Server-Timing": server_timing(ledger), **traceparent(root)}


def answer_report(prepared: Prepared, outcome: AnswerOutcome, ledger: BudgetLedger) -> Report:
    usage = outcome.usage
    found = outcome.attribution
    return Report(
        citations=citations(prepared, outcome),
        answer_mode=outcome.written_by,
        answerable=outcome.answerable,
        evidence_similarity=(None if outcome.similarity is None else round(outcome.similarity, 4)),
        grounded=found.grounded if found is not None else None,
        attribution=found.method if found is not None else "skipped",
        trace_id=current_trace_id(),
        timings_ms=ledger.timings_ms,
        stages=stages(ledger),
        budget=answer_budget(ledger),
        degradations=degradations(ledger),
        usage=UsageOut(**asdict(usage)) if usage is not None else None,
        finish_reason=outcome.finish_reason,
        model=outcome.model,
        quarantined=quarantined(prepared),
    )
