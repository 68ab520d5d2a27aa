"""The rule that picks the service's default cross-encoder: a trained one only when it helps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval.rerank.trained import (
    MIN_NDCG_GAIN,
    RECORD_NAME,
    choose_reranker,
    trained_model_dir,
)


def _trained(models: Path, collection: str, record: dict[str, object] | str) -> Path:
    target = trained_model_dir(models, collection)
    target.mkdir(parents=True)
    text = record if isinstance(record, str) else json.dumps(record)
    (target / RECORD_NAME).write_text(text)
    return target


def test_a_trained_model_with_enough_gain_is_the_default(tmp_path: Path) -> None:
    target = _trained(tmp_path, "demo", {"heldout": {"gain_ndcg10": MIN_NDCG_GAIN + 0.01}})
    choice = choose_reranker(None, tmp_path, "demo")
    assert choice.model == str(target)
    assert "heldout" in choice.reason
    assert choose_reranker("", tmp_path, "demo").model == str(target)


def test_no_gain_keeps_rerank_off(tmp_path: Path) -> None:
    _trained(tmp_path, "demo", {"heldout": {"gain_ndcg10": 0.01}})
    choice = choose_reranker(None, tmp_path, "demo")
    assert choice.model is None
    assert "+0.010" in choice.reason and "under the bar" in choice.reason


def test_the_evaluations_gain_outranks_the_held_out_one(tmp_path: Path) -> None:
    _trained(
        tmp_path,
        "demo",
        {"heldout": {"gain_ndcg10": 0.2}, "evaluation": {"gain_ndcg10": 0.0}},
    )
    choice = choose_reranker(None, tmp_path, "demo")
    assert choice.model is None and "evaluation" in choice.reason


def test_a_configured_cross_encoder_wins(tmp_path: Path) -> None:
    _trained(tmp_path, "demo", {"heldout": {"gain_ndcg10": 0.3}})
    assert choose_reranker("some/cross-encoder", tmp_path, "demo").model == "some/cross-encoder"


@pytest.mark.parametrize(
    ("record", "says"),
    [(None, "none trained"), ("not json", "no readable"), ({"heldout": {}}, "records no")],
)
def test_missing_or_broken_records_keep_rerank_off(
    tmp_path: Path, record: dict[str, object] | str | None, says: str
) -> None:
    if record is not None:
        _trained(tmp_path, "demo", record)
    choice = choose_reranker(None, tmp_path, "demo")
    assert choice.model is None and says in choice.reason


def test_only_the_named_collections_model_counts(tmp_path: Path) -> None:
    _trained(tmp_path, "other", {"heldout": {"gain_ndcg10": 0.3}})
    assert choose_reranker(None, tmp_path, "demo").model is None
