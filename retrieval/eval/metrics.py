"""Ranking metrics for retrieval evaluation: recall@k, reciprocal rank and nDCG@k.

Pure functions over one question's ranking (ids, best first) and its set of relevant ids, with
binary relevance; ``score_rankings`` averages them over questions. An id that appears twice in
a ranking counts once, at its first place (a ranking of chunks is first folded to documents by
the caller). With no relevant id a question scores 0 everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

#: The cut-offs reported for recall.
RECALL_AT = (1, 5, 10)
NDCG_AT = 10
MRR_AT = 10


def _first_places(ranking: Sequence[Hashable], k: int) -> list[Hashable]:
    """The first ``k`` distinct ids of ``ranking``, in order."""
    seen: set[Hashable] = set()
    out: list[Hashable] = []
    for item in ranking:
        if item in seen:
            continue
        seen.add(item)
        out.append(item)
        if len(out) == k:
            break
    return out


def recall_at(ranking: Sequence[Hashable], relevant: Iterable[Hashable], k: int) -> float:
    """The share of the relevant ids found among the first ``k`` places."""
    wanted = set(relevant)
    if not wanted:
        return 0.0
    return len(wanted.intersection(_first_places(ranking, k))) / len(wanted)


def reciprocal_rank(ranking: Sequence[Hashable], relevant: Iterable[Hashable], k: int) -> float:
    """1 / the place (1-based) of the first relevant id within the first ``k``, else 0."""
    wanted = set(relevant)
    for place, item in enumerate(_first_places(ranking, k), start=1):
        if item in wanted:
            return 1.0 / place
    return 0.0


def ndcg_at(ranking: Sequence[Hashable], relevant: Iterable[Hashable], k: int) -> float:
    """Normalised discounted cumulative gain at ``k``, binary gains, log2 discount."""
    wanted = set(relevant)
    if not wanted:
        return 0.0
    dcg = sum(
        1.0 / math.log2(place + 1)
        for place, item in enumerate(_first_places(ranking, k), start=1)
        if item in wanted
    )
    ideal = sum(1.0 / math.log2(place + 1) for place in range(1, min(len(wanted), k) + 1))
    return dcg / ideal


@dataclass(frozen=True)
class Scores:
    """Means over the questions of one retriever."""

    questions: int
    recall_at_1: float
    recall_at_5: float
    recall_at_10: float
    mrr_at_10: float
    ndcg_at_10: float


def score_rankings(
    rankings: Sequence[Sequence[Hashable]], relevant: Sequence[Iterable[Hashable]]
) -> Scores:
    """The mean of each metric over questions: ``rankings[i]`` answers ``relevant[i]``."""
    if len(rankings) != len(relevant):
        raise ValueError(f"{len(rankings)} rankings for {len(relevant)} questions")
    n = len(rankings)
    if n == 0:
        raise ValueError("no questions to score")
    sets = [set(r) for r in relevant]

    def mean(values: Iterable[float]) -> float:
        return sum(values) / n

    r1, r5, r10 = (
        mean(recall_at(rank, rel, k) for rank, rel in zip(rankings, sets, strict=True))
        for k in RECALL_AT
    )
    return Scores(
        questions=n,
        recall_at_1=r1,
        recall_at_5=r5,
        recall_at_10=r10,
        mrr_at_10=mean(reciprocal_rank(a, b, MRR_AT) for a, b in zip(rankings, sets, strict=True)),
        ndcg_at_10=mean(ndcg_at(a, b, NDCG_AT) for a, b in zip(rankings, sets, strict=True)),
    )
