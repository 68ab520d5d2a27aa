"""Reranker with a tiny local cross-encoder, and its failures when none can be loaded."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from retrieval import Passage, Reranker, RerankerUnavailable
from retrieval.model_hub import hub_kwargs
from tests.fakes.rerankers import OverlapReranker


def _passages(n: int) -> list[Passage]:
    texts = ["how to define a function", "a list and a loop", "the value of it", "zzz", "you"]
    return [
        Passage(i, "docs", f"s{i}.rst", "Doc", "", texts[i % len(texts)], score=1.0 - i / 10)
        for i in range(n)
    ]


def check_reranks(reranker: Reranker) -> list[int]:
    """``reranker`` (loaded) returns the ``top_n`` best first, each passage otherwise unchanged;
    returns the ids of the top 3 for "how do i define a function?"."""
    passages = _passages(5)
    result = reranker.rerank("how do i define a function?", passages, top_n=3)
    assert result.candidates == 5 and len(result.passages) == 3
    scores = [p.rerank_score for p in result.passages if isinstance(p.rerank_score, float)]
    assert len(scores) == 3 and scores == sorted(scores, reverse=True)
    by_id = {p.id: p for p in passages}
    for p in result.passages:  # everything but rerank_score is kept
        assert p == dataclasses.replace(by_id[p.id], rerank_score=p.rerank_score)
    assert reranker.rerank("q", [], top_n=3).passages == []
    assert len(reranker.rerank("q", passages, top_n=10).passages) == 5
    return [p.id for p in result.passages]


def test_rerank_orders_by_the_models_score() -> None:
    reranker = OverlapReranker()
    assert not reranker.available
    reranker.load()
    # Passage 0 holds 4 of the question's 6 words, passage 1 one ("a"), the rest none: a tie
    # that keeps the vector order, so passage 2 is third.
    assert check_reranks(reranker) == [0, 1, 2]
    assert reranker.cross_encoder.pairs_scored == 5 + 5


def test_a_model_that_fails_to_score_is_unavailable() -> None:
    reranker = OverlapReranker(fail_with=RuntimeError("CUDA error: device-side assert"))
    reranker.load()
    with pytest.raises(RerankerUnavailable, match="reranking failed: RuntimeError: CUDA"):
        reranker.rerank("q", _passages(2), top_n=1)


@pytest.mark.slow
def test_rerank_orders_by_cross_encoder_score(tiny_cross_encoder_path: Path) -> None:
    """The real sentence-transformers ``CrossEncoder``, a tiny random one. Slow: it imports
    torch and sentence-transformers (about 7 s on 2 cores); the fast tests above run the same
    ``rerank`` over ``OverlapReranker``."""
    reranker = Reranker(str(tiny_cross_encoder_path))
    assert not reranker.available
    reranker.load()
    reranker.load()  # idempotent
    assert reranker.available and reranker.model_name == str(tiny_cross_encoder_path)
    check_reranks(reranker)


def test_rerank_before_load_is_unavailable() -> None:
    with pytest.raises(RerankerUnavailable, match="not loaded"):
        Reranker("anything").rerank("q", _passages(2), top_n=1)


@pytest.mark.parametrize("model", [None, ""])
def test_no_model_configured(model: str | None) -> None:
    reranker = Reranker(model)
    with pytest.raises(RerankerUnavailable, match="no cross-encoder configured") as caught:
        reranker.load()
    assert caught.value.status_code == 503
    assert not reranker.available and reranker.model_name is None


@pytest.mark.slow
def test_an_uncached_hub_id_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slow: the real ``CrossEncoder`` is what fails, after importing torch and
    sentence-transformers (about 7 s on 2 cores)."""
    import sentence_transformers  # noqa: F401  # pay the import before timing

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    started = time.perf_counter()
    with pytest.raises(RerankerUnavailable, match="no-such/model") as caught:
        Reranker("no-such/model").load()
    assert time.perf_counter() - started < 10
    assert caught.value.__cause__ is not None


def test_hub_ids_load_from_the_cache_only_unless_downloads_are_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert hub_kwargs("org/model") == {"local_files_only": True}
    assert hub_kwargs(str(tmp_path)) == {}
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert hub_kwargs("org/model") == {}
