"""``ragtime bench embed``: the embedding backends side by side (torch, onnx, onnx-int8).

Latency of one question (batch 1) and throughput of batches of 32 passages, measured in turns
(each round times every backend once, in a rotating order, so that noise from a shared machine
falls on all of them alike), reported as medians and as ratios to torch. Agreement with torch:
the cosine of each backend's vector of a demo-corpus chunk with torch's (min, mean), and, for
the demo questions, how many of torch's top 10 chunks each backend's own index returns.

    python -m bench.embed [--chunks 200] [--rounds 5] [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import faiss
import numpy as np

from retrieval import Embedder, chunk_text, iter_documents
from retrieval.embeddings import EMBEDDING_BACKENDS, EmbeddingBackend
from retrieval.ingest import embedding_input

ROOT = Path(__file__).resolve().parents[1]
DEMO_CORPUS = ROOT / "demo" / "corpus"
DEMO_QUESTIONS = ROOT / "demo" / "questions.txt"


def demo_chunks(limit: int) -> list[str]:
    """``limit`` chunks of the demo corpus, spread evenly over it, as ingest embeds them."""
    texts = [
        embedding_input(chunk)
        for file in iter_documents(DEMO_CORPUS)
        for chunk in chunk_text(file.read_text(encoding="utf-8-sig"), file.name)
    ]
    step = max(1, len(texts) // limit)
    return texts[::step][:limit]


def demo_questions() -> list[str]:
    lines = DEMO_QUESTIONS.read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _timed(embedder: Embedder, texts: list[str]) -> float:
    start = time.perf_counter()
    embedder.embed(texts)
    return time.perf_counter() - start


def measure(chunks: int = 200, rounds: int = 5, cache_dir: Path | None = None) -> str:
    """Load the three backends, time them in turns, compare their vectors; a text report."""
    cache = cache_dir or Path(tempfile.mkdtemp(prefix="ragtime-onnx-"))
    backends: list[EmbeddingBackend] = list(EMBEDDING_BACKENDS)  # type: ignore[arg-type]
    embedders: dict[str, Embedder] = {}
    lines = [f"ONNX cache: {cache}"]
    for backend in backends:
        embedder = Embedder(backend=backend, cache_dir=cache)
        start = time.perf_counter()
        embedder.load()
        lines.append(f"load {backend}: {time.perf_counter() - start:.2f} s (first, incl. export)")
        embedders[backend] = embedder
    passages, questions = demo_chunks(chunks), demo_questions()
    for embedder in embedders.values():  # warm up every shape path once
        embedder.embed(questions[:2])
        embedder.embed(passages[:32])

    single: dict[str, list[float]] = {b: [] for b in backends}
    batch: dict[str, list[float]] = {b: [] for b in backends}
    turn = 0
    for _ in range(rounds):
        for question in questions:
            turn += 1
            for backend in backends[turn % 3 :] + backends[: turn % 3]:
                single[backend].append(_timed(embedders[backend], [question]))
        for start in range(0, len(passages) - 31, 32):
            turn += 1
            for backend in backends[turn % 3 :] + backends[: turn % 3]:
                batch[backend].append(_timed(embedders[backend], passages[start : start + 32]))

    torch_single = statistics.median(single["torch"])
    torch_batch = statistics.median(batch["torch"])
    lines.append("")
    lines.append(
        f"{'backend':<10} {'1 question ms':>14} {'x torch':>8} {'32 passages ms':>15} "
        f"{'passages/s':>11} {'x torch':>8}"
    )
    for backend in backends:
        one, many = statistics.median(single[backend]), statistics.median(batch[backend])
        lines.append(
            f"{backend:<10} {one * 1000:>14.2f} {torch_single / one:>8.2f} {many * 1000:>15.1f} "
            f"{32 / many:>11.1f} {torch_batch / many:>8.2f}"
        )
    lines.append(
        f"({len(single['torch'])} single and {len(batch['torch'])} batch timings per backend, "
        "medians; x torch = speed-up)"
    )

    vectors = {b: embedders[b].embed(passages) for b in backends}
    asked = {b: embedders[b].embed(questions) for b in backends}
    top10: dict[str, np.ndarray] = {}
    for backend in backends:
        index = faiss.IndexFlatIP(vectors[backend].shape[1])
        index.add(vectors[backend])
        top10[backend] = index.search(asked[backend], 10)[1]
    lines.append("")
    lines.append(f"agreement with torch over {len(passages)} chunks and {len(questions)} questions")
    lines.append(
        f"{'backend':<10} {'cos min':>8} {'cos mean':>9} {'top-10 overlap':>15} {'same top-1':>11}"
    )
    for backend in backends:
        cos = (vectors[backend] * vectors["torch"]).sum(axis=1)
        overlap = [
            len(set(a) & set(b)) / 10 for a, b in zip(top10[backend], top10["torch"], strict=True)
        ]
        same_top1 = float(np.mean(top10[backend][:, 0] == top10["torch"][:, 0]))
        lines.append(
            f"{backend:<10} {cos.min():>8.4f} {cos.mean():>9.4f} {np.mean(overlap):>15.3f} "
            f"{same_top1:>11.3f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cache-dir", type=Path)
    args = parser.parse_args(argv)
    print(measure(args.chunks, args.rounds, args.cache_dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
