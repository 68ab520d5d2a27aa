"""Late interaction as a re-scorer that needs no training (issue 46 §3): does it beat the
hybrid order? (``python -m bench.studies.late_interaction --dataset python-faq``).

Over each question's first ``--candidates`` passages in the shipped hybrid order (what rerank
would score), each passage is scored by MaxSim with the embedder's own token vectors: for each
of the question's tokens, its best cosine among the passage's tokens (the passage as embedded:
heading line above its text), summed (ColBERT's score, with a model never trained for it:
all-MiniLM-L6-v2's token vectors before mean pooling). Reported per set, beside the hybrid
order: nDCG@10 and recall@10 of the MaxSim order, of MaxSim fused with the hybrid order by
reciprocal rank, and the milliseconds a question's re-scoring took (its tokens and its
candidates' in one batch each, on one thread), median.

The sets, their data and the store are ``ragtime eval retrieval``'s (``--data``: where ``make
eval-data`` put them; ``--work-dir``: where the store is kept and reused).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from app.pipeline.services import default_embedder
from app.settings import get_settings
from retrieval import Passage
from retrieval.eval.metrics import score_rankings
from retrieval.eval.retrievers import ragtime_store, search_in_mode
from retrieval.eval.rows import sources_of
from retrieval.eval.sets import SETS, build_set
from retrieval.formats.document import first_section
from retrieval.ingest.chunking import embedded_title, heading_line
from retrieval.search.fusion import rrf_fuse


def as_embedded(passage: Passage) -> str:
    line = heading_line(
        embedded_title(passage.title, passage.source), first_section(passage.section)
    )
    return f"{line}\n{passage.text}" if line else passage.text


def maxsim(query: np.ndarray, passages: Sequence[np.ndarray]) -> list[float]:
    """Each passage's late-interaction score: the sum over query tokens of the best cosine."""
    return [float((query @ tokens.T).max(axis=1).sum()) for tokens in passages]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=sorted(SETS), default="python-faq")
    parser.add_argument("--data", type=Path, default=Path(".ragtime/eval"))
    parser.add_argument("--work-dir", type=Path, default=Path(".ragtime/eval/work"))
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--limit", type=int, default=0, help="the first N questions only")
    args = parser.parse_args()

    dataset = build_set(args.dataset, args.data, args.work_dir / "corpus")
    questions = dataset.questions[: args.limit or None]
    embedder = default_embedder(get_settings())  # as `ragtime eval retrieval` embeds
    embedder.load()
    store = ragtime_store(dataset, embedder, args.work_dir, print)
    relevant = [list(q.relevant) or [q.answer_source] for q in questions]
    vectors = embedder.embed([q.text for q in questions])
    hybrid, late, mixed, spent = [], [], [], []
    for question, vector in zip(questions, vectors, strict=True):
        found = search_in_mode(store, "hybrid", question.text, vector, 100)
        candidates = found[: args.candidates]
        started = time.perf_counter()
        (query,) = embedder.token_vectors([question.text])
        scores = maxsim(query, embedder.token_vectors([as_embedded(p) for p in candidates]))
        spent.append((time.perf_counter() - started) * 1000.0)
        by_score = sorted(range(len(candidates)), key=lambda i: -scores[i])
        fused = [i for i, _ in rrf_fuse([by_score, list(range(len(candidates)))])]
        rest = found[args.candidates :]
        hybrid.append(sources_of(found))
        late.append(sources_of([candidates[i] for i in by_score] + rest))
        mixed.append(sources_of([candidates[i] for i in fused] + rest))
    print(f"{dataset.name}: {len(questions)} questions, {args.candidates} candidates each")
    for name, rankings in (("hybrid", hybrid), ("maxsim", late), ("maxsim+hybrid rrf", mixed)):
        scores_ = score_rankings(rankings, relevant)
        print(f"  {name:18} nDCG@10 {scores_.ndcg_at_10:.4f}  recall@10 {scores_.recall_at_10:.4f}")
    print(f"  re-scoring ms p50 {statistics.median(spent):.1f}")


if __name__ == "__main__":
    main()
