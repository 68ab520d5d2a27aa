"""The ranking metrics against values computed by hand."""

from __future__ import annotations

import math

import pytest

from retrieval.eval.metrics import ndcg_at, recall_at, reciprocal_rank, score_rankings


def test_recall_counts_relevant_ids_within_the_cut_off() -> None:
    ranking = ["a", "b", "c", "d"]
    assert recall_at(ranking, {"c"}, 2) == 0.0
    assert recall_at(ranking, {"c"}, 3) == 1.0
    assert recall_at(ranking, {"a", "d", "z"}, 4) == pytest.approx(2 / 3)


def test_a_repeated_id_takes_one_place_only() -> None:
    # Folded to distinct ids: a, b, c; so "c" is third, inside a cut-off of 3.
    assert recall_at(["a", "a", "b", "c"], {"c"}, 3) == 1.0
    assert reciprocal_rank(["a", "a", "b", "c"], {"c"}, 10) == pytest.approx(1 / 3)


def test_reciprocal_rank_is_one_over_the_first_relevant_place() -> None:
    assert reciprocal_rank(["x", "y", "a"], {"a"}, 10) == pytest.approx(1 / 3)
    assert reciprocal_rank(["x", "y", "a"], {"a"}, 2) == 0.0
    assert reciprocal_rank(["a", "b"], {"b", "a"}, 10) == 1.0


def test_ndcg_by_hand() -> None:
    # One relevant id at place 3: DCG = 1/log2(4) = 0.5; ideal = 1.
    assert ndcg_at(["x", "y", "a"], {"a"}, 10) == pytest.approx(0.5)
    # Two relevant at places 1 and 3: DCG = 1 + 0.5; ideal = 1 + 1/log2(3).
    assert ndcg_at(["a", "x", "b"], {"a", "b"}, 10) == pytest.approx(1.5 / (1 + 1 / math.log2(3)))
    assert ndcg_at(["x", "y", "a"], {"a"}, 2) == 0.0
    assert ndcg_at(["a"], set(), 10) == 0.0


def test_score_rankings_averages_over_questions() -> None:
    scores = score_rankings([["a", "b"], ["x", "y", "z", "w", "v", "b"]], [["a"], ["b"]])
    assert scores.questions == 2
    assert scores.recall_at_1 == pytest.approx(0.5)
    assert scores.recall_at_5 == pytest.approx(0.5)
    assert scores.recall_at_10 == pytest.approx(1.0)
    assert scores.mrr_at_10 == pytest.approx((1 + 1 / 6) / 2)
    assert scores.ndcg_at_10 == pytest.approx((1 + 1 / math.log2(7)) / 2)


def test_score_rankings_refuses_mismatched_or_empty_input() -> None:
    with pytest.raises(ValueError, match="2 rankings for 1 questions"):
        score_rankings([["a"], ["b"]], [["a"]])
    with pytest.raises(ValueError, match="no questions"):
        score_rankings([], [])
