"""The retrievers the evaluation compares: the baseline (fixed windows of ``BASELINE_WORDS``
words, plain vectors, exact search; their vectors kept in the work directory by text), and
ragtime's own store of the dataset (``ragtime_store``: kept while the dataset, the embedder,
the chunking and the retrieval package's code are unchanged), searched in a mode
(``search_in_mode``: dense, keyword or hybrid, as ``/v1/search`` searches)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path

import faiss
import numpy as np

from retrieval.embedding.embedder import Embedder
from retrieval.eval.python_faq import Dataset
from retrieval.ingest.chunking import DEFAULT_CHUNK_TOKENS, DEFAULT_OVERLAP_TOKENS
from retrieval.ingest.folder import ingest_path, iter_documents
from retrieval.search.fusion import fuse_passages, keyword_weight
from retrieval.search.passages import Passage
from retrieval.store.document_store import DocumentStore

COLLECTION = "eval"
BASELINE_WORDS = 200
_INGEST_CODE = Path(__file__).resolve().parents[1]  # the retrieval package


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
    weight = keyword_weight(question, lambda terms: store.keyword_rarity(collection, terms))
    return fuse_passages(dense, keyword, depth, keyword_weight=weight)
