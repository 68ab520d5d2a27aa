"""``ragtime bench embed``: the embedding backends side by side (torch, onnx, onnx-int8).

Speed: latency of one demo question (batch 1) and throughput of batches of 32 passages cut to
``--tokens`` tokens (100 by default; demo chunks are about 140), measured in rounds: in each
round every backend, in a rotating order, embeds every question and every batch, so that noise
from a shared machine falls on all of them alike. Medians, and ratios to torch. A backend is
never timed call by call against another: right after an ONNX Runtime call torch ran several
times slower, an interference that a service running one backend never sees.

Agreement with torch, over the whole demo corpus as ingest embeds it (``retrieval.ingest.chunking``,
``embedding_input``): the cosine of each chunk's vector with torch's (min, 1st percentile,
mean), and for each demo question the top 10 of an index built with that backend against the
top 10 of an index built with torch (identical lists, mean overlap, same first passage).

    ragtime bench embed [--chunks 0] [--rounds 5] [--batches 6] [--tokens 100] [--cache-dir DIR]
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import faiss
import numpy as np

from bench.harness.paths import DEMO_CORPUS, DEMO_QUESTIONS
from retrieval import Embedder, chunk_text, default_embedding_model_path, iter_documents
from retrieval.embedding.embedder import EMBEDDING_BACKENDS, EmbeddingBackend
from retrieval.ingest.chunking import embedding_input

BATCH = 32


def demo_chunks(limit: int = 0) -> list[str]:
    """The demo corpus's chunks as ingest embeds them; ``limit`` > 0 keeps that many, spread
    evenly over the corpus."""
    texts = [
        embedding_input(chunk)
        for file in iter_documents(DEMO_CORPUS)
        for chunk in chunk_text(file.read_text(encoding="utf-8-sig"), file.name)
    ]
    if limit <= 0 or limit >= len(texts):
        return texts
    return texts[:: len(texts) // limit][:limit]


def demo_questions() -> list[str]:
    lines = DEMO_QUESTIONS.read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def cut_passages(texts: list[str], tokens: int, count: int) -> list[str]:
    """``count`` texts of about ``tokens`` MiniLM tokens each ([CLS] and [SEP] included): the
    chunks longer than that, cut after the token that makes the count."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(default_embedding_model_path() / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    cut = [
        text[: encoding.offsets[tokens - 2][1]]
        for text, encoding in zip(texts, tokenizer.encode_batch(texts), strict=True)
        if len(encoding.ids) > tokens
    ]
    if not cut:
        raise ValueError(f"no demo chunk has {tokens} tokens")
    return [cut[i % len(cut)] for i in range(count)]


def _timed(embedder: Embedder, texts: list[str]) -> float:
    start = time.perf_counter()
    embedder.embed(texts)
    return time.perf_counter() - start


def _speed(
    embedders: dict[str, Embedder], questions: list[str], passages: list[str], rounds: int
) -> list[str]:
    backends = list(embedders)
    for embedder in embedders.values():  # warm up every shape path once
        embedder.embed(questions[:2])
        embedder.embed(passages[:BATCH])
    single: dict[str, list[float]] = {b: [] for b in backends}
    batch: dict[str, list[float]] = {b: [] for b in backends}
    for turn in range(rounds):
        for backend in backends[turn % 3 :] + backends[: turn % 3]:
            embedder = embedders[backend]
            single[backend] += [_timed(embedder, [question]) for question in questions]
            batch[backend] += [
                _timed(embedder, passages[start : start + BATCH])
                for start in range(0, len(passages) - BATCH + 1, BATCH)
            ]
    torch_single = statistics.median(single["torch"])
    torch_batch = statistics.median(batch["torch"])
    lines = [
        f"{'backend':<10} {'1 question ms':>14} {'x torch':>8} {'32 passages ms':>15} "
        f"{'passages/s':>11} {'x torch':>8}"
    ]
    for backend in backends:
        one, many = statistics.median(single[backend]), statistics.median(batch[backend])
        lines.append(
            f"{backend:<10} {one * 1000:>14.2f} {torch_single / one:>8.2f} {many * 1000:>15.1f} "
            f"{BATCH / many:>11.1f} {torch_batch / many:>8.2f}"
        )
    lines.append(
        f"({len(single['torch'])} single and {len(batch['torch'])} batch timings per backend, "
        "medians; x torch = speed-up)"
    )
    return lines


def _agreement(
    embedders: dict[str, Embedder], chunks: list[str], questions: list[str]
) -> list[str]:
    vectors = {b: e.embed(chunks) for b, e in embedders.items()}
    top10: dict[str, np.ndarray] = {}
    for backend, embedder in embedders.items():
        index = faiss.IndexFlatIP(vectors[backend].shape[1])  # the store's, without the id map
        index.add(vectors[backend])
        top10[backend] = index.search(embedder.embed(questions), 10)[1]
    lines = [
        f"agreement with torch: {len(chunks)} chunks, top 10 of {len(questions)} questions",
        f"{'backend':<10} {'cos min':>8} {'cos p1':>8} {'cos mean':>9} {'same top-10':>12} "
        f"{'overlap':>8} {'same top-1':>11}",
    ]
    for backend in embedders:
        cos = (vectors[backend] * vectors["torch"]).sum(axis=1)
        pairs = list(zip(top10[backend].tolist(), top10["torch"].tolist(), strict=True))
        identical = sum(a == b for a, b in pairs)
        overlap = float(np.mean([len(set(a) & set(b)) / 10 for a, b in pairs]))
        same_top1 = sum(a[0] == b[0] for a, b in pairs)
        lines.append(
            f"{backend:<10} {cos.min():>8.4f} {np.percentile(cos, 1):>8.4f} {cos.mean():>9.4f} "
            f"{f'{identical}/{len(pairs)}':>12} {overlap:>8.3f} {f'{same_top1}/{len(pairs)}':>11}"
        )
    return lines


def measure(
    chunks: int = 0,
    rounds: int = 5,
    cache_dir: Path | None = None,
    *,
    batches: int = 6,
    tokens: int = 100,
) -> str:
    """Load the three backends, time them in rounds, compare their vectors; a text report.
    Without ``cache_dir`` the ONNX exports go in a temporary directory, removed afterwards."""
    if cache_dir is None:
        with tempfile.TemporaryDirectory(prefix="ragtime-onnx-") as tmp:
            return measure(chunks, rounds, Path(tmp), batches=batches, tokens=tokens)
    lines = [f"ONNX cache: {cache_dir}"]
    embedders: dict[str, Embedder] = {}
    backends: list[EmbeddingBackend] = list(EMBEDDING_BACKENDS)  # type: ignore[arg-type]
    for backend in backends:
        embedder = Embedder(backend=backend, cache_dir=cache_dir)
        start = time.perf_counter()
        embedder.load()
        lines.append(f"load {backend}: {time.perf_counter() - start:.2f} s (export included)")
        embedders[backend] = embedder
    texts, questions = demo_chunks(chunks), demo_questions()
    passages = cut_passages(texts, tokens, batches * BATCH)
    lines += ["", f"speed: batch 1 = a demo question, batch {BATCH} = passages of {tokens} tokens"]
    lines += _speed(embedders, questions, passages, rounds)
    lines += ["", *_agreement(embedders, texts, questions)]
    return "\n".join(lines)
