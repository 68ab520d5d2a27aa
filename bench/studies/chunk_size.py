"""How chunk size and overlap change retrieval on the demo corpus: FAQ questions find their
answers (``python -m bench.studies.chunk_size``).

A quick measurement for choosing ``RAGTIME_CHUNK_TOKENS`` and ``RAGTIME_CHUNK_OVERLAP_TOKENS``,
not the full evaluation (``ragtime eval retrieval``). The questions are the FAQ's own question
headings (demo/corpus/faq, 175 of them); the corpus is the whole demo corpus (tutorial and FAQ)
with every question heading left out of what is embedded, so a question cannot find itself.
Each question's answer is the text under its heading. A chunk is relevant to a question when
at least half of its words are the answer's, or it holds at least half of the answer.

Compared, with the shipped MiniLM (ONNX) and exact cosine search: ragtime's chunker at several
sizes and overlaps (sections kept, heading line embedded above the text), and the plain
baseline of the issue (fixed 200-word windows over each file's text, no headings). Reported
per setting: chunks, hit@1/5/10 (a relevant chunk in the top k), MRR@10 and nDCG@10 of the
first relevant chunk.
"""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter
from dataclasses import dataclass
from itertools import groupby

import numpy as np

from bench.harness.paths import DEMO_CORPUS
from retrieval import Embedder
from retrieval.formats import Document, parse_file
from retrieval.formats.document import Block
from retrieval.ingest.chunking import chunk_document, embedding_input
from retrieval.ingest.tokens import wordpiece_counter

CORPUS = DEMO_CORPUS
Key = tuple[str, tuple[str, ...]]  # (source, path down to the question heading)
Labelled = tuple[str, Document, list[tuple["Key | None", Block]]]  # source, document, blocks


@dataclass
class Passage:
    text: str  # what is embedded
    words: Counter[Key | None]  # how many of its words belong to each answer


def _question_at(path: tuple[str, ...]) -> int | None:
    return next((i for i in range(len(path) - 1, -1, -1) if path[i].endswith("?")), None)


def _labelled(source: str, document: Document) -> list[tuple[Key | None, Block]]:
    """Blocks with the question they answer, the question heading taken out of their path."""
    out: list[tuple[Key | None, Block]] = []
    for block in document.blocks:
        i = _question_at(block.path)
        if i is None:
            out.append((None, block))
        else:
            masked = Block(block.text, block.path[:i] + block.path[i + 1 :], block.page, block.code)
            out.append(((source, block.path[: i + 1]), masked))
    return out


def load_corpus() -> list[Labelled]:
    files = sorted(CORPUS.rglob("*.rst.txt"))
    out = []
    for file in files:
        source = file.relative_to(CORPUS).as_posix()
        document = parse_file(file)
        out.append((source, document, _labelled(source, document)))
    return out


def ragtime_passages(corpus: list[Labelled], max_tokens: int, overlap: int) -> list[Passage]:
    count = wordpiece_counter()
    passages = []
    for source, document, labelled in corpus:
        for key, run in groupby(labelled, key=lambda item: item[0]):
            part = Document(document.kind, document.title, [block for _, block in run])
            for chunk in chunk_document(
                part, source, max_tokens=max_tokens, overlap_tokens=overlap, count=count
            ):
                words = Counter({key: len(chunk.text.split())})
                passages.append(Passage(embedding_input(chunk), words))
    return passages


def plain_passages(corpus: list[Labelled], size: int = 200) -> list[Passage]:
    passages = []
    for _, _, labelled in corpus:
        stream = [(key, word) for key, block in labelled for word in block.text.split()]
        for start in range(0, len(stream), size):
            window = stream[start : start + size]
            words = Counter(key for key, _ in window)
            passages.append(Passage(" ".join(word for _, word in window), words))
    return passages


def _relevant(passage: Passage, key: Key, answer_words: int) -> bool:
    mine = passage.words.get(key, 0)
    total = sum(passage.words.values())
    return mine > 0 and (2 * mine >= total or 2 * mine >= answer_words)


def evaluate(
    embedder: Embedder, passages: list[Passage], questions: list[Key], qvecs: np.ndarray
) -> tuple[dict[int, float], float, float]:
    answer_words: Counter[Key | None] = Counter()
    for passage in passages:
        answer_words.update(passage.words)
    vectors = embedder.embed([p.text for p in passages])
    scores = qvecs @ vectors.T
    ranks = []
    for row, key in enumerate(questions):
        top = np.argsort(-scores[row])[:10]
        rank = next(
            (r for r, i in enumerate(top, 1) if _relevant(passages[i], key, answer_words[key])),
            None,
        )
        ranks.append(rank)
    n = len(questions)
    hit = {k: sum(1 for r in ranks if r is not None and r <= k) / n for k in (1, 5, 10)}
    mrr = sum(1 / r for r in ranks if r) / n
    ndcg = sum(1 / math.log2(r + 1) for r in ranks if r) / n
    return hit, mrr, ndcg


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--settings", nargs="+", default=["128:0", "192:0", "192:32", "256:0", "256:32", "256:64"],
        help="max_tokens:overlap_tokens pairs",
    )  # fmt: skip
    parser.add_argument("--backend", default="onnx")
    args = parser.parse_args(argv)
    embedder = Embedder(backend=args.backend)
    embedder.load()
    corpus = load_corpus()
    questions = sorted({key for _, _, labelled in corpus for key, _ in labelled if key is not None})
    qvecs = embedder.embed([key[1][-1] for key in questions])
    print(f"{len(questions)} questions, {len(corpus)} files, backend {args.backend}")
    print("| chunking | chunks | hit@1 | hit@5 | hit@10 | MRR@10 | nDCG@10 | s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    runs: list[tuple[str, int, int]] = [("plain 200-word windows", 0, 0)]
    for setting in args.settings:
        size, overlap = (int(x) for x in setting.split(":"))
        runs.append((f"ragtime {size} tokens, overlap {overlap}", size, overlap))
    for name, size, overlap in runs:
        started = time.perf_counter()
        passages = ragtime_passages(corpus, size, overlap) if size else plain_passages(corpus)
        hit, mrr, ndcg = evaluate(embedder, passages, questions, qvecs)
        elapsed = time.perf_counter() - started
        print(
            f"| {name} | {len(passages)} | {hit[1]:.3f} | {hit[5]:.3f} | {hit[10]:.3f} "
            f"| {mrr:.3f} | {ndcg:.3f} | {elapsed:.0f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
