"""Retrieval evaluation on real questions: datasets, ranking metrics, and the runner.

``build_dataset`` turns the Python FAQ and the rest of the Python documentation (fetched at
set-up by ``make eval-data``) into a corpus and questions, and ``keyword_dataset`` draws typed
keyword queries (identifiers, options, numbers, error messages) and ``phrase_dataset``
remembered phrases from that corpus; ``debian_faq`` and ``emacs_faq`` build two sets of real
users' questions that are not Python's documentation, by the same cut (``faq_corpus``), and
``sets`` names every set for ``ragtime eval retrieval``; ``evaluate``
scores a plain baseline, ragtime's order in a search mode, each reranker and each saving of the
budget engine with ``metrics``.
"""

from retrieval.eval.metrics import Scores, ndcg_at, recall_at, reciprocal_rank, score_rankings
from retrieval.eval.python_faq import (
    Dataset,
    EvalDataMissing,
    Question,
    build_dataset,
    require_sources,
)
from retrieval.eval.python_keywords import keyword_dataset
from retrieval.eval.python_phrases import phrase_dataset
from retrieval.eval.report import EvalReport, EvalRow, table
from retrieval.eval.retrievers import fixed_word_chunks
from retrieval.eval.runner import evaluate

__all__ = [
    "Dataset",
    "EvalDataMissing",
    "EvalReport",
    "EvalRow",
    "Question",
    "Scores",
    "build_dataset",
    "evaluate",
    "fixed_word_chunks",
    "keyword_dataset",
    "ndcg_at",
    "phrase_dataset",
    "recall_at",
    "reciprocal_rank",
    "require_sources",
    "score_rankings",
    "table",
]
