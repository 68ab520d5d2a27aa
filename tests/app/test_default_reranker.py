"""The service reranks with the default collection's trained model only when it helps."""

from __future__ import annotations

import json
from pathlib import Path

from app.pipeline.services import default_reranker
from app.settings import Settings
from retrieval.rerank.trained import RECORD_NAME, trained_model_dir


def _settings(tmp_path: Path, **values: object) -> Settings:
    return Settings(data_dir=tmp_path, **values)  # type: ignore[arg-type]


def _train(tmp_path: Path, gain: float) -> Path:
    target = trained_model_dir(tmp_path / "models", "demo")
    target.mkdir(parents=True)
    (target / RECORD_NAME).write_text(json.dumps({"heldout": {"gain_ndcg10": gain}}))
    return target


def test_the_trained_model_is_used_when_it_helps(tmp_path: Path) -> None:
    target = _train(tmp_path, 0.08)
    reranker = default_reranker(_settings(tmp_path))
    assert reranker.model_name == str(target) and not reranker.available  # not loaded yet


def test_rerank_stays_off_without_gain(tmp_path: Path) -> None:
    _train(tmp_path, 0.02)
    assert default_reranker(_settings(tmp_path)).model_name is None


def test_rerank_stays_off_without_a_trained_model(tmp_path: Path) -> None:
    assert default_reranker(_settings(tmp_path)).model_name is None


def test_a_configured_model_is_used_instead(tmp_path: Path) -> None:
    _train(tmp_path, 0.3)
    reranker = default_reranker(_settings(tmp_path, reranker_model="/models/ce"))
    assert reranker.model_name == "/models/ce"


def test_another_collections_model_is_not_used(tmp_path: Path) -> None:
    _train(tmp_path, 0.3)
    settings = _settings(tmp_path, default_collection="docs")
    assert default_reranker(settings).model_name is None
