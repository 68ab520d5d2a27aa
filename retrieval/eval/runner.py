"""Run the retrieval evaluation: each retriever's ranking of every question, scored.

The retrievers, all over the same dataset (``python_faq``):

* **baseline**: the corpus cut into fixed windows of 200 words, embedded by the given embedder
  (plain MiniLM), searched exactly (``faiss.IndexFlatIP``), no chunking or headings of ours;
* **vector order** (``mode`` dense), or keyword or hybrid order: ragtime's own ingest
  (``ingest_path``) into a ``DocumentStore`` and its ``search`` (dense), ``keyword_search``
  (BM25), or both fused by reciprocal rank (hybrid): what ``/v1/search`` returns in that mode
  without a reranker;
* **rerank**: each given ``Reranker`` over the vector order's first ``rerank_candidates``
  passages, and over the fewer candidates the budget engine may cut to
  (``tracing.budget.policy``: half of them, then ``top_k``); the rest keep the vector order;
* **rerank within a share**: each ``Reranker`` given each of ``rerank_budgets_ms`` per
  question (``Reranker.rerank_within``, as the rerank stage runs: batches best-first until the
  share runs out, the rest in the found order): nDCG@10 against rerank time;
* **prompt**: the ``top_k`` passages the answer is given, packed by the prompt assembler into
  the configured context tokens and into each smaller context of the policy's ladder: the
  passages that reach the prompt, as the generator sees them; and the same sizes **pruned** to
  each passage's sentences closest to the question (``inference.prompt``), which lets more of
  the passages into a small prompt, each with fewer of its sentences.

Rankings of chunks are folded to documents (a source counts once, at its first place) and
scored with ``metrics``. The store and the baseline's vectors are kept in ``work_dir`` and
reused while the dataset, the embedder and ragtime's ingest code are unchanged. The retrievers
are in ``retrievers``, the rerank and prompt rows in ``rows``, the report in ``report``;
``evaluate`` runs them in order.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from retrieval.embedding.embedder import Embedder
from retrieval.eval.metrics import score_rankings
from retrieval.eval.python_faq import Dataset
from retrieval.eval.report import EvalReport, EvalRow
from retrieval.eval.retrievers import (
    BASELINE_WORDS,
    COLLECTION,
    MODES,
    baseline_rankings,
    ragtime_store,
    search_in_mode,
)
from retrieval.eval.rows import (
    CONTEXT_SHARES,
    PromptPacker,
    model_label,
    p50,
    prompt_rows,
    rerank_budget_rows,
    rerank_levels,
    rerank_rows,
    sources_of,
)
from retrieval.ingest.chunking import DEFAULT_CHUNK_TOKENS, DEFAULT_OVERLAP_TOKENS
from retrieval.rerank.reranker import Reranker
from retrieval.search.passages import Passage


def evaluate(
    dataset: Dataset,
    *,
    mode: str = "dense",
    embedder: Embedder,
    baseline_embedder: Embedder,
    rerankers: Sequence[Reranker] = (),
    packer: PromptPacker | None = None,
    rerank_candidates: int = 20,
    rerank_budgets_ms: Sequence[float] = (),
    rerank_batch_size: int = 8,
    top_k: int = 4,
    context_tokens: int = 768,
    min_context_tokens: int = 64,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
    depth: int = 100,
    work_dir: Path,
    say: Callable[[str], None] = lambda line: None,
) -> EvalReport:
    """Every retriever's scores on ``dataset`` (models are loaded here)."""
    if depth < 10:
        raise ValueError(f"depth must be at least 10 (nDCG@10 and recall@10), got {depth}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    questions = [q.text for q in dataset.questions]
    relevant = [list(q.relevant) or [q.answer_source] for q in dataset.questions]
    rows: list[EvalRow] = []
    notes: list[str] = []

    baseline_embedder.load()
    base_queries = baseline_embedder.embed(questions)
    ranked, baseline_chunks, times = baseline_rankings(
        dataset, baseline_embedder, base_queries, depth, work_dir, say
    )
    rows.append(
        EvalRow(
            f"baseline: plain {model_label(baseline_embedder.model_name)}, "
            f"{BASELINE_WORDS}-word chunks, exact search",
            "baseline",
            score_rankings(ranked, relevant),
            p50(times),
        )
    )

    embedder.load()
    store = ragtime_store(
        dataset,
        embedder,
        work_dir,
        say,
        chunk_tokens=chunk_tokens,
        overlap_tokens=overlap_tokens,
    )
    try:
        ragtime_chunks = store.collections().get(COLLECTION, 0)
        query_vectors = embedder.embed(questions)
        found: list[list[Passage]] = []
        times = []
        store.keyword_search(COLLECTION, "warm", 1)  # its index loaded before the clock
        for question, vector in zip(questions, query_vectors, strict=True):
            started = time.perf_counter()
            found.append(search_in_mode(store, mode, question, vector, depth))
            times.append((time.perf_counter() - started) * 1000.0)
        vector_scores = score_rankings([sources_of(p) for p in found], relevant)
        order_name = "vector order" if mode == "dense" else f"{mode} order"
        rows.append(
            EvalRow(f"ragtime: {order_name} (no rerank)", "vector", vector_scores, p50(times))
        )

        reranked, best_order = rerank_rows(
            questions, relevant, found, rerankers, rerank_levels(rerank_candidates, top_k)
        )
        rows += reranked
        full_rates = {r.model: r.ms_per_candidate_p50 for r in reranked if r.level == "full"}
        rows += rerank_budget_rows(
            questions,
            relevant,
            found,
            rerankers,
            rerank_candidates,
            rerank_budgets_ms,
            rerank_batch_size,
            [full_rates.get(reranker.model_name or "") for reranker in rerankers],
        )
        if not rerankers:
            notes.append("no cross-encoder was available: no rerank rows")
        if packer is None:
            notes.append("no prompt tokenizer: no context rows")
        else:
            order = order_name if best_order is found else "best rerank"
            budgets = [max(round(context_tokens * s), min_context_tokens) for s in CONTEXT_SHARES]
            rows += prompt_rows(questions, relevant, best_order, packer, top_k, budgets, order)
            pieces = [
                [store.passage_pieces(p, vector) for p in ps[:top_k]]
                for ps, vector in zip(best_order, query_vectors, strict=True)
            ]
            rows += prompt_rows(
                questions, relevant, best_order, packer, top_k, budgets, order, pieces
            )
    finally:
        store.close()
    return EvalReport(
        dataset=dataset.name,
        questions=len(questions),
        documents=dataset.documents,
        sample=dataset.sample,
        baseline_chunks=baseline_chunks,
        ragtime_chunks=ragtime_chunks,
        rows=rows,
        settings={
            "embedder": embedder.model_name,
            "embedding_backend": embedder.backend,
            "rerank_candidates": rerank_candidates,
            "rerank_budgets_ms": list(rerank_budgets_ms),
            "rerank_batch_size": rerank_batch_size,
            "top_k": top_k,
            "context_tokens": context_tokens,
            "chunk_tokens": chunk_tokens,
            "chunk_overlap_tokens": overlap_tokens,
            "depth": depth,
            "mode": mode,
        },
        notes=notes,
    )
