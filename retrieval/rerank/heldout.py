"""How a reranker in training is judged on held-out queries: nDCG@10 and MRR@10 of search order
against reranked order (``evaluate_heldout``, with ``rank_figures``, as the retrieval evaluation
computes them), and the checks on a validation set that stop training early and keep the best
weights (``EarlyStop``)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from retrieval.eval.metrics import MRR_AT, NDCG_AT, ndcg_at, reciprocal_rank
from retrieval.formats.document import first_section
from retrieval.rerank.mining import MinedQuery, MinedSet, candidate_text


@dataclass
class RankFigures:
    ndcg10: float
    mrr10: float


def rank_figures(orders: Sequence[Sequence[bool]], totals: Sequence[int]) -> RankFigures:
    """Mean nDCG@10 and MRR@10 of ranked lists (True: relevant), each with its total of relevant
    passages (some may be missing from the list), as the retrieval evaluation computes them
    (``retrieval.eval.metrics``): the two report comparable figures."""
    if not orders:
        return RankFigures(0.0, 0.0)
    ndcg = mrr = 0.0
    for order, total in zip(orders, totals, strict=True):
        ranking = list(range(len(order)))
        present = {place for place, relevant in enumerate(order) if relevant}
        missing = {-1 - j for j in range(max(total - len(present), 0))}  # not in the list
        ndcg += ndcg_at(ranking, present | missing, NDCG_AT)
        mrr += reciprocal_rank(ranking, present | missing, MRR_AT)
    return RankFigures(round(ndcg / len(orders), 4), round(mrr / len(orders), 4))


def evaluate_heldout(
    model: Any, heldout: Sequence[MinedQuery], mined: MinedSet, section_sizes: dict[Any, int]
) -> dict[str, Any]:
    """Vector order against reranked order on the held-out queries, and ms per candidate."""
    vector_orders, reranked_orders, totals, ms_per_candidate = [], [], [], []
    for query in heldout:
        hits = mined.candidates.get(query.text, [])
        if not hits:
            continue
        relevant = [(p.source, first_section(p.section)) == query.group for p in hits]
        started = time.perf_counter()
        scores = model.predict(
            [(query.text, candidate_text(query, p)) for p in hits],
            batch_size=len(hits),
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        ms_per_candidate.append((time.perf_counter() - started) * 1000 / len(hits))
        order = sorted(range(len(hits)), key=lambda i: -float(scores[i]))
        vector_orders.append(relevant)
        reranked_orders.append([relevant[i] for i in order])
        totals.append(section_sizes[query.group])
    vector = rank_figures(vector_orders, totals)
    reranked = rank_figures(reranked_orders, totals)
    return {
        "queries": len(vector_orders),
        "candidates": max((len(mined.candidates.get(q.text, [])) for q in heldout), default=0),
        "vector": asdict(vector),
        "reranked": asdict(reranked),
        "gain_ndcg10": round(reranked.ndcg10 - vector.ndcg10, 4),
        "gain_mrr10": round(reranked.mrr10 - vector.mrr10, 4),
        "ms_per_candidate_median": round(statistics.median(ms_per_candidate), 2)
        if ms_per_candidate
        else None,
    }


@dataclass
class Checks:
    """The held-out checks of one run: (step, reranked nDCG@10) each, the best of them, and the
    search order's nDCG@10 on the same queries (what a check must beat to be worth keeping)."""

    curve: list[tuple[int, float]] = field(default_factory=list)
    search_ndcg10: float | None = None
    best_step: int | None = None
    best_ndcg10: float | None = None
    stopped_early: bool = False


class EarlyStop:
    """Check ``score()`` every ``every`` steps; keep the best weights; say when to stop.

    ``score()`` gives ``evaluate_heldout``'s figures: ``reranked`` and ``vector`` (search order),
    each with ``ndcg10``."""

    def __init__(
        self, model: Any, score: Callable[[], dict[str, Any]], every: int, patience: int
    ) -> None:
        self.model = model
        self.score = score
        self.every = every
        self.patience = patience
        self.checks = Checks()
        self._best_state: dict[str, Any] | None = None
        self._misses = 0

    def after(self, step: int, progress: Callable[[str], None]) -> bool:
        """Check at ``step`` when due; whether training should stop."""
        if not self.every or step % self.every:
            return False
        import torch

        self.model.eval()
        with torch.inference_mode():
            figures = self.score()
        self.model.train()
        ndcg = float(figures["reranked"]["ndcg10"])
        self.checks.search_ndcg10 = float(figures["vector"]["ndcg10"])
        self.checks.curve.append((step, ndcg))
        best = self.checks.best_ndcg10
        if best is None or ndcg > best:
            self.checks.best_step, self.checks.best_ndcg10 = step, ndcg
            self._best_state = {
                k: v.detach().clone() for k, v in self.model.model.state_dict().items()
            }
            self._misses = 0
        else:
            self._misses += 1
        progress(
            f"step {step}: validation nDCG@10 {ndcg:.4f} (best {self.checks.best_ndcg10:.4f} "
            f"at step {self.checks.best_step}; search order {self.checks.search_ndcg10:.4f})"
        )
        if self._misses >= self.patience:
            self.checks.stopped_early = True
            progress(f"stopped at step {step}: {self.patience} checks without a better nDCG@10")
            return True
        return False

    def restore_best(self, progress: Callable[[str], None]) -> None:
        if self._best_state is not None:
            self.model.model.load_state_dict(self._best_state)
            progress(f"kept the weights of step {self.checks.best_step}")
