"""Where a collection's trained cross-encoder lives, and whether the service uses it by default.

``ragtime reranker train --collection NAME`` saves its model in
``<data_dir>/models/reranker-NAME/`` with ``ragtime-training.json`` beside the weights: how it
was trained and its held-out figures. The service reranks with it only when no other
cross-encoder is configured (``RAGTIME_RERANKER_MODEL`` empty) and its nDCG@10 gain over
vector order reaches ``MIN_NDCG_GAIN``: the gain on the evaluation (``evaluation`` in the
record) when one was recorded, else the gain on the trainer's held-out mined queries. This
module reads files only; it never imports torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The bar of issue 12: a reranker must raise nDCG@10 over vector order by at least this much.
MIN_NDCG_GAIN = 0.05
RECORD_NAME = "ragtime-training.json"


def trained_model_dir(models_dir: Path, collection: str) -> Path:
    """``<models_dir>/reranker-<collection>``: where the trainer saves that collection's model."""
    return Path(models_dir) / f"reranker-{collection}"


def read_record(model_dir: Path) -> dict[str, Any] | None:
    """The training record saved with a model; ``None`` when missing or unreadable."""
    try:
        record = json.loads((Path(model_dir) / RECORD_NAME).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def record_evaluation(model_dir: Path, figures: dict[str, Any]) -> bool:
    """Put ``figures`` (with ``gain_ndcg10``) in the model's record as its ``evaluation``;
    ``False`` when ``model_dir`` holds no record (not a model the trainer saved). The record is
    replaced whole (written beside it, then renamed)."""
    record = read_record(model_dir)
    if record is None:
        return False
    record["evaluation"] = figures
    path = Path(model_dir) / RECORD_NAME
    tmp = path.with_name(f".{RECORD_NAME}.tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    tmp.replace(path)
    return True


def ndcg_gain(record: dict[str, Any]) -> tuple[float | None, str]:
    """The nDCG@10 gain the record shows over vector order, and which figures it came from."""
    for key in ("evaluation", "heldout"):
        figures = record.get(key)
        if isinstance(figures, dict) and isinstance(figures.get("gain_ndcg10"), int | float):
            return float(figures["gain_ndcg10"]), key
    return None, "none"


@dataclass(frozen=True)
class RerankerChoice:
    """The cross-encoder the service loads (``None``: rerank off) and why."""

    model: str | None
    reason: str


def choose_reranker(
    configured: str | None, models_dir: Path, collection: str, *, min_gain: float = MIN_NDCG_GAIN
) -> RerankerChoice:
    """The configured cross-encoder; else the collection's trained one if its gain meets the bar."""
    if configured:
        return RerankerChoice(configured, "RAGTIME_RERANKER_MODEL is set")
    model_dir = trained_model_dir(models_dir, collection)
    if not model_dir.is_dir():
        return RerankerChoice(
            None,
            f"no cross-encoder configured and none trained for {collection!r} "
            f"(`ragtime reranker train --collection {collection}`)",
        )
    record = read_record(model_dir)
    if record is None:
        return RerankerChoice(None, f"{model_dir} has no readable {RECORD_NAME}: retrain it")
    gain, source = ndcg_gain(record)
    if gain is None:
        return RerankerChoice(None, f"{model_dir / RECORD_NAME} records no nDCG@10 gain")
    if gain < min_gain:
        return RerankerChoice(
            None,
            f"the trained reranker of {collection!r} raises nDCG@10 by {gain:+.3f} on its "
            f"{source} figures, under the bar of {min_gain:+.3f}: rerank stays off",
        )
    return RerankerChoice(
        str(model_dir),
        f"trained reranker of {collection!r}: nDCG@10 {gain:+.3f} over vector order ({source})",
    )
