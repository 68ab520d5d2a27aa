"""``ragtime bench quality``: what each saving of the budget engine costs in answer quality.

In-process, on the configured models and collection (the CPU default on the demo corpus), for
each question: retrieve its passages once, then generate

* the **full** plan's answer (the configured context and output tokens);
* an answer from each smaller context (shares of the configured context tokens), the passages
  packed in rank order and the last one cut (``context``);
* an answer from the same shares and the whole context **pruned** to each passage's sentences
  closest to the question (``pruned``; ``inference.prompt``);
* and, for output caps, the full answer cut after each share of its tokens (decoding is greedy,
  so a capped answer is the full answer's first tokens).

An answer's score is how many of the **reference's content words** (four letters or more, not
stop words) it holds. Two references:

* ``--python-faq DATA`` (what ``make bench`` runs): the Python FAQ evaluation's questions
  (``retrieval.eval``), their passages from its store, and as reference each question's own
  answer, as the FAQ's authors wrote it. An answer scores for saying what the right answer says,
  whichever passage it took it from;
* otherwise the demo questions on the configured collection, and as reference the passage
  ranked first. That rewards copying the first passage, so a context cut down to little more
  than it scores above the full one: it prices output caps, not contexts.

A knob's quality at a share is the sum of the scores there over the sum of the full plan's
(capped at 1 in the default table, as measured in the model's own: ``tables``). Beside each
share go the milliseconds it saves at the median, priced at the rates measured on the full
plan's run (prefill per uncached token, decode per token): the prompt tokens and answer tokens
it removes. (A smaller prompt run right after the full one finds most of its prefix cached, so
its own timing would flatter it.) Each share also counts the questions whose answer scored
above and below the full plan's. The curves are written as ``QualityTable``s (``tables``;
``tracing/budget/quality.json`` is the shipped one), which order the policy's savings.

Rerank is not measured here: no cross-encoder ships offline, so its curve stays as assumed
(``notes`` say so) until a reranker and a retrieval evaluation exist.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from bench.harness.results import RunHeader

_STOP_WORDS = (
    "about above after again also been before being below between both could does doing down "
    "during each from further have having here into itself just more most once only other "
    "over same should some such than that their them then there these they this those through "
    "under until very were what when where which while with would your yours answer question "
    "passage passages python"
)
STOP = frozenset(_STOP_WORDS.split())
SHARES = (0.75, 0.5, 0.375, 0.25)
#: Pruning is weighed at the whole context too: it may fill it differently from packing.
PRUNED_SHARES = (1.0, *SHARES)


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z_]{4,}", text.lower()) if w not in STOP}


class KnobPoint(BaseModel):
    share: float
    quality: float
    saved_ms_p50: float = Field(description="Median ms saved against the full plan.")
    better: int = Field(0, description="Questions whose answer scored above the full plan's.")
    worse: int = Field(0, description="Questions whose answer scored below the full plan's.")


class QualityResult(RunHeader):
    schema_version: str = "ragtime-bench-quality/1"
    questions: int
    context_tokens: int
    max_output_tokens: int
    full_score_mean: float
    full_generate_ms_p50: float = Field(description="Priced as the savings are (uncached).")
    context: list[KnobPoint]
    output: list[KnobPoint]
    pruned: list[KnobPoint] = Field(default_factory=list)
    model: str = Field("", description="The served model the answers came from.")
    measure: str = Field(
        "the reference passage's content words the answer keeps, relative to the full plan, "
        "over the demo questions",
        description="What an answer's score counts, over which questions.",
    )
    notes: list[str] = Field(default_factory=list)


@dataclass
class Measured:
    """``measure_quality``'s curves, the full plan's mean score and median generation ms."""

    context: list[KnobPoint]
    output: list[KnobPoint]
    pruned: list[KnobPoint]
    full_score: float
    full_ms: float
    questions: int = 0
    model: str = ""
    """The served model the answers came from (the backend's ``model``)."""


@dataclass
class Case:
    """One question as measured: its passages (best first), the content words an answer is
    scored on, and each passage's scored pieces for pruning; ``facts``, when given, score it
    instead: the key facts of a labelled answer set it holds (``app.evaluation.scoring``)."""

    question: str
    passages: list[Any]
    reference: set[str]
    pieces: list[list[Any]]
    facts: list[list[str]] | None = None

    def score(self, answer: str) -> float:
        if self.facts is not None:
            from app.evaluation.scoring import facts_held

            return float(sum(facts_held(self.facts, answer)))
        return float(len(content_words(answer) & self.reference))


#: Builds a question's ``Case`` from the started services (None: nothing retrieved).
CaseBuilder = Callable[[Any, str], Awaitable["Case | None"]]


def demo_cases(
    settings: Any, *, collection: str | None = None, facts: dict[str, list[list[str]]] | None = None
) -> CaseBuilder:
    """Cases from the configured collection (or ``collection``); the reference is the first
    passage's content words. It rewards copying that passage, so a smaller context that holds
    little else can score above the full one: fit for the output curve, not for comparing
    contexts. With ``facts`` (by question), the key facts of a labelled set score instead."""
    from app.pipeline import Pipeline
    from app.pipeline.budget_engine import build_budget_engine
    from tracing.budget import BudgetLedger, BudgetSession

    collection = collection or settings.default_collection

    async def build(services: Any, question: str) -> Case | None:
        ledger = BudgetLedger(120_000)
        budget = build_budget_engine(settings, services.costs)
        pipeline = Pipeline(services)
        query = pipeline.query(question, collection, settings.top_k)
        passages = await pipeline.retrieve(query, BudgetSession(budget, ledger, route="bench"))
        if not passages:
            return None
        embedded = await services.stages.embed.embed_question(
            question, deadline=ledger.deadline, embedder=services.embedders_for(collection)
        )
        pieces = [services.store.passage_pieces(p, embedded.vector) for p in passages]
        wanted = None if facts is None else facts[question]
        return Case(question, passages, content_words(passages[0].text), pieces, wanted)

    return build


def faq_cases(
    store: Any, collection: str, embedder: Any, answers: dict[str, str], k: int
) -> CaseBuilder:
    """Cases from the Python FAQ evaluation (``retrieval.eval``): its store's passages, and as
    reference the content words of the question's own answer, written by the FAQ's authors."""

    async def build(services: Any, question: str) -> Case | None:
        vector = embedder.embed([question])[0]
        passages = store.search(collection, vector, k)
        if not passages:
            return None
        pieces = [store.passage_pieces(p, vector) for p in passages]
        return Case(question, passages, content_words(answers[question]), pieces)

    return build


async def measure_quality(
    questions: Sequence[str],
    *,
    settings: Any,
    cases: CaseBuilder | None = None,
    shares: Sequence[float] = SHARES,
    pruned_shares: Sequence[float] = PRUNED_SHARES,
) -> Measured:
    """The context, output and pruned-context curves, against the full plan, over the cases
    ``cases`` builds (``demo_cases`` unless given)."""
    from app.pipeline.budget_engine import cost_model
    from app.pipeline.services import Services
    from inference import GenerationDone, TextDelta

    build = cases or demo_cases(settings)
    services = Services.build(settings, costs=cost_model(settings))
    await services.start()
    assembler = services.stages.assemble.assembler
    if services.problems or assembler is None:
        raise RuntimeError(f"the service did not load: {services.problems}")
    backend = services.backend
    full_ctx, full_out = settings.context_tokens, settings.max_output_tokens

    async def generate(prompt: Any, max_tokens: int) -> tuple[list[str], float, float]:
        """Deltas, the prefill ms per uncached token, and the decode ms per token."""
        started = time.perf_counter()
        deltas: list[str] = []
        first = 0.0
        uncached = prompt.prompt_tokens
        async for event in backend.stream(prompt, max_tokens=max_tokens):
            if isinstance(event, TextDelta):
                first = first or (time.perf_counter() - started) * 1000.0
                deltas.append(event.text)
            elif isinstance(event, GenerationDone):
                uncached = event.usage.prompt_tokens - event.usage.cached_tokens
                break
        decode = ((time.perf_counter() - started) * 1000.0 - first) / max(len(deltas) - 1, 1)
        return deltas, first / max(uncached, 1), decode

    full_scores: list[float] = []
    full_ms: list[float] = []
    ctx_scores: dict[float, list[float]] = {s: [] for s in shares}
    ctx_saved: dict[float, list[float]] = {s: [] for s in shares}
    out_scores: dict[float, list[float]] = {s: [] for s in shares}
    out_saved: dict[float, list[float]] = {s: [] for s in shares}
    pruned_scores: dict[float, list[float]] = {s: [] for s in pruned_shares}
    pruned_saved: dict[float, list[float]] = {s: [] for s in pruned_shares}

    async def score_smaller(
        case: Case, smaller: Any, scores: list[float], saved: list[float]
    ) -> None:
        answer, _, _ = await generate(smaller, full_out)
        scores.append(case.score("".join(answer)))
        # Priced at the full plan's measured rates: the smaller prompt shares its prefix with
        # the one before it, so its own timing would flatter it.
        removed = prompt.prompt_tokens - smaller.prompt_tokens
        saved.append(removed * prefill + (len(deltas) - len(answer)) * per_token)

    try:
        for question in questions:
            case = await build(services, question)
            if case is None:
                continue
            passages = case.passages
            prompt = assembler.assemble(question, passages, context_tokens=full_ctx)
            deltas, prefill, per_token = await generate(prompt, full_out)
            full_scores.append(case.score("".join(deltas)))
            full_ms.append(prompt.prompt_tokens * prefill + len(deltas) * per_token)
            for share in shares:
                cut = max(round(full_out * share), 1)
                out_scores[share].append(case.score("".join(deltas[:cut])))
                out_saved[share].append(max(len(deltas) - cut, 0) * per_token)
                smaller = assembler.assemble(
                    question, passages, context_tokens=max(round(full_ctx * share), 1)
                )
                await score_smaller(case, smaller, ctx_scores[share], ctx_saved[share])
            for share in pruned_shares:
                pruned = assembler.assemble(
                    question,
                    passages,
                    context_tokens=max(round(full_ctx * share), 1),
                    pieces=case.pieces,
                )
                await score_smaller(case, pruned, pruned_scores[share], pruned_saved[share])
    finally:
        await services.close()
    base = sum(full_scores) or 1.0

    def curve(scores: dict[float, list[float]], saved: dict[float, list[float]]) -> list[KnobPoint]:
        return [
            KnobPoint(
                share=share,
                quality=round(sum(scores[share]) / base, 4),
                saved_ms_p50=round(statistics.median(saved[share]), 1) if saved[share] else 0.0,
                better=sum(a > f for a, f in zip(scores[share], full_scores, strict=True)),
                worse=sum(a < f for a, f in zip(scores[share], full_scores, strict=True)),
            )
            for share in sorted(scores)
        ]

    return Measured(
        curve(ctx_scores, ctx_saved),
        curve(out_scores, out_saved),
        curve(pruned_scores, pruned_saved),
        statistics.fmean(full_scores) if full_scores else 0.0,
        statistics.median(full_ms) if full_ms else 0.0,
        len(full_scores),
        getattr(backend, "model", ""),
    )
