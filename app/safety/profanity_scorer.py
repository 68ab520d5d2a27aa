"""The profanity classifier's scores as one sparse matrix product, checked against the library.

``alt-profanity-check`` scores text with a TF-IDF vectorizer and a ``CalibratedClassifierCV``
over five ``LinearSVC`` folds with sigmoid calibration; ``predict_prob`` goes through
scikit-learn's generic ``predict_proba``, whose input checks and per-fold label encoding cost
about 4 ms per call on our cores (15 ms under load), for a question of ten words. The same
arithmetic, from the fitted model's own coefficients (sklearn/calibration.py:
``_CalibratedClassifier.predict_proba``, ``_SigmoidCalibration.predict``: the positive class's
probability is ``expit(-(a * decision + b))``, averaged over the folds), is one product of the
sparse TF-IDF row with a 5-column matrix.

``compile_scorer`` builds it only for a model of that exact shape, and only if it reproduces
``predict_prob`` on a fixed set of texts; otherwise it returns the library's function, so an
upgrade of either package can slow the screen down but never change its verdicts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

Scorer = Callable[[list[str]], Any]

#: Clean and abusive texts the compiled scorer must score as the library does.
CHECK_TEXTS = (
    "How do I give a function parameter a default value?",
    "what is a list comprehension",
    "you are a stupid idiot",
    "fuck this shit",
    "shut up, moron",
    "",
    "warm up",
)
TOLERANCE = 1e-9


class LinearCalibratedScorer:
    """``mean_k expit(-(a_k * (x . w_k + c_k) + b_k))`` for TF-IDF row ``x``: the fitted model's
    probability of the positive (profane) class."""

    def __init__(self, vectorizer: Any, model: Any) -> None:
        folds = model.calibrated_classifiers_
        self._vectorizer = vectorizer
        self._weights = np.vstack([f.estimator.coef_.ravel() for f in folds]).T  # (vocab, folds)
        self._intercepts = np.array([f.estimator.intercept_[0] for f in folds])
        self._a = np.array([f.calibrators[0].a_ for f in folds], dtype=np.float64)
        self._b = np.array([f.calibrators[0].b_ for f in folds], dtype=np.float64)

    def __call__(self, texts: list[str]) -> np.ndarray:
        rows = self._vectorizer.transform(texts)
        decisions = np.asarray(rows @ self._weights) + self._intercepts
        logits = -(self._a * decisions + self._b)
        return np.mean(1.0 / (1.0 + np.exp(-logits)), axis=1)


def _compilable(model: Any) -> bool:
    folds = getattr(model, "calibrated_classifiers_", None)
    if not folds or len(getattr(model, "classes_", ())) != 2:
        return False
    return all(
        getattr(f, "method", None) == "sigmoid"
        and len(getattr(f, "calibrators", ())) == 1
        and getattr(getattr(f, "estimator", None), "coef_", np.empty((0, 0))).shape[0] == 1
        for f in folds
    )


def compile_scorer(
    vectorizer: Any, model: Any, reference: Scorer, texts: Sequence[str] = CHECK_TEXTS
) -> Scorer:
    """The compiled scorer when it agrees with ``reference`` on ``texts``, else ``reference``."""
    if not _compilable(model):
        return reference
    try:
        compiled = LinearCalibratedScorer(vectorizer, model)
        agrees = np.allclose(
            compiled(list(texts)), reference(list(texts)), rtol=0.0, atol=TOLERANCE
        )
    except (AttributeError, ValueError, TypeError, IndexError):
        return reference
    return compiled if agrees else reference
