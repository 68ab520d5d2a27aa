"""Keyword search beside the vectors: a BM25 index (``bm25s``) over a snapshot's chunks, and
reciprocal rank fusion of a dense and a keyword ranking.

Each chunk is indexed as its title, section and text, in the snapshot's ``ids`` order (document
``i`` of the index is chunk ``ids[i]``). Tokens are bm25s's, lowercased, English stopwords
removed, with a splitter of our own: bm25s's default pattern (``\\b\\w\\w+\\b``) cuts
``os.path.join`` into ``os``, ``path``, ``join``, ``--verbose`` into ``verbose`` and ``3.11``
into ``11``, so an exact identifier could not be told from its words. Ours keeps the whole
(``os.path.join``, ``--verbose``, ``3.11``, ``__init__``) and its parts besides. A query's
compound that the index knows is searched whole, without its parts (a chunk that repeats
``path`` and ``join`` would outrank the one holding the identifier); one it does not know is
searched by its parts, which still find the words. bm25s (and scipy under it) is imported at
the first index built or loaded.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.search.passages import Passage

if TYPE_CHECKING:
    from bm25s.tokenization import Tokenizer

#: The folder of a snapshot that holds its BM25 index (bm25s's files).
KEYWORD_DIR = "bm25"
#: The usual constant of reciprocal rank fusion (Cormack et al., 2009).
RRF_K = 60
#: A word (two or more word characters), or a compound of words joined by ``.``, ``-`` or
#: ``_`` (``os.path.join``, ``utf-8``, ``3.11``), with any leading dashes (``--verbose``).
_COMPOUND = re.compile(r"(?u)-{0,2}\w[\w]*(?:[.\-]\w+)*")
_PART = re.compile(r"(?u)\w\w+")
#: What makes a query's token an exact term, typed to be found as written: a leading dash
#: (``--verbose``), a dotted name (``os.path.join``), an underscore (``__slots__``), a digit
#: (``3.11``, ``RS232``), or inner capitals (``UnicodeDecodeError``, ``CPython``). Hyphenated
#: prose (``thread-safe``) and ``e.g`` are not.
_EXACT = re.compile(r"^-{1,2}[A-Za-z]|\w\.\w\w|_|\d|[a-z][A-Z]|^[A-Z]{2,}\w*[a-z]")
_ABBREVIATION = re.compile(r"[A-Za-z]\.[A-Za-z]")
#: The keyword ranking's weight in hybrid fusion, for a query typed to be found by its words
#: (``keyword_weight``): twice the dense one's; none for any other query (the dense order
#: stands). Chosen on ``ragtime eval retrieval`` over three sets (BENCHMARKS.md, "Hybrid
#: retrieval"): BM25 over the FAQ's prose questions lowered their nDCG@10 at any weight (0.730
#: dense; 0.706 at 0.1, 0.580 at 1), while typed keywords and remembered phrases need it; at 2
#: the FAQ keeps dense's 0.7304, at 3 it falls to 0.7284.
KEYWORD_WEIGHT = 2.0
#: The most words (split at white space) of a query that brings the keyword ranking in: what is
#: typed into a search box (``os.path.join``, ``OSError: [Errno 9] Bad file descriptor``, a
#: phrase remembered from a clause), not a question. At 6 the FAQ's nDCG@10 equals dense's;
#: at 7 it is lower (0.727).
SHORT_QUERY_WORDS = 6
#: A question, by its mark or its first word: searched by its meaning unless it holds an exact
#: term.
_QUESTION = re.compile(
    r"\?\s*$|^\W*(?:who|what|when|where|why|how|which|can|could|should|shall|is|are|was|were|"
    r"do|does|did|will|would|may|might|must)\b",
    re.IGNORECASE,
)


def split_tokens(text: str) -> list[str]:
    """``text``'s tokens: each compound whole, then its parts of two or more characters."""
    tokens: list[str] = []
    for match in _COMPOUND.finditer(text):
        whole = match.group(0)
        parts = _PART.findall(whole)
        if whole not in parts and len(whole) >= 2:
            tokens.append(whole)
        tokens.extend(parts)
    return tokens


def _quiet() -> None:
    """bm25s sets its logger to DEBUG at import (``bm25s/__init__.py``), which would print
    "Building index from IDs objects" at every publish: back to the root's level."""
    logging.getLogger("bm25s").setLevel(logging.NOTSET)


def _tokenizer() -> Tokenizer:
    from bm25s.tokenization import Tokenizer

    _quiet()

    return Tokenizer(lower=True, splitter=split_tokens, stopwords="en")


def tokens(text: str) -> list[str]:
    """The index's tokens of ``text`` (a query's), as bm25s's tokenizer makes them."""
    found = _tokenizer().tokenize([text], return_as="string", show_progress=False)
    return [token for token in found[0] if token]


def exact_terms(query: str) -> list[str]:
    """The tokens of ``query`` (as typed, case kept) that are exact terms (``_EXACT``)."""
    return [
        token
        for token in split_tokens(query)
        if _EXACT.search(token) and not _ABBREVIATION.fullmatch(token)
    ]


def keyword_weight(query: str) -> float:
    """The keyword ranking's weight in hybrid fusion for ``query``: ``KEYWORD_WEIGHT`` for a
    query of at most ``SHORT_QUERY_WORDS`` words that holds an exact term or is not a question
    (a name, a date, a phrase from a clause), else 0."""
    if not query.strip() or len(query.split()) > SHORT_QUERY_WORDS:
        return 0.0
    if exact_terms(query) or not _QUESTION.search(query):
        return KEYWORD_WEIGHT
    return 0.0


def chunk_document(title: str, section: str, text: str) -> str:
    """What the index holds of one chunk."""
    return f"{title}\n{section}\n{text}"


class KeywordIndex:
    """A BM25 index over ``n`` documents (a snapshot's chunks, in ``ids`` order)."""

    def __init__(self, retriever: Any, count: int) -> None:
        self._retriever = retriever
        self.count = count

    @classmethod
    def build(cls, documents: Sequence[str]) -> KeywordIndex:
        import bm25s

        tokenized = _tokenizer().tokenize(list(documents), return_as="tuple", show_progress=False)
        retriever = bm25s.BM25()
        retriever.index(tokenized, show_progress=False)
        return cls(retriever, len(documents))

    def save(self, folder: Path) -> list[Path]:
        """bm25s's files in ``folder``; the paths written."""
        folder.mkdir(parents=True, exist_ok=True)
        self._retriever.save(str(folder))
        return sorted(p for p in folder.rglob("*") if p.is_file())

    @classmethod
    def load(cls, folder: Path) -> KeywordIndex:
        import bm25s

        _quiet()
        retriever = bm25s.BM25.load(str(folder), mmap=True)
        return cls(retriever, int(retriever.scores["num_docs"]))

    def _query_tokens(self, query: str) -> list[str]:
        """``query``'s tokens the index knows; a compound it knows (``os.path.join``) stands
        without its parts, which would otherwise outweigh it in chunks that repeat them."""
        vocab = self._retriever.vocab_dict
        known = [word for word in tokens(query) if word in vocab]
        for whole in [word for word in known if _PART.findall(word) != [word]]:
            for part in _PART.findall(whole):
                if part in known:
                    known.remove(part)
        return known

    def search(
        self, query: str, k: int, allowed: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` best documents for ``query`` as ``(position, score)``, best first; only
        those scoring above 0 (holding a query token), and only ``allowed`` positions when
        given."""
        words = self._query_tokens(query)
        if not words or k <= 0 or not self.count:
            return []
        scores = np.asarray(self._retriever.get_scores(words), dtype=np.float32)
        if allowed is not None:
            masked = np.zeros_like(scores)
            masked[allowed] = scores[allowed]
            scores = masked
        hits = np.flatnonzero(scores > 0)
        if not len(hits):
            return []
        top = min(k, len(hits))
        best = hits[np.argpartition(-scores[hits], top - 1)[:top]]
        best = best[np.lexsort((best, -scores[best]))]  # by score, then position: stable
        return [(int(i), float(scores[i])) for i in best]


def rrf_fuse(
    rankings: Iterable[Sequence[int]], k: int = RRF_K, weights: Sequence[float] | None = None
) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: each id scores the sum over the rankings holding it of
    ``weight / (k + rank)`` (rank from 1; each ranking's weight 1 unless ``weights`` gives
    it); best first, ties by first appearance."""
    scores: dict[int, float] = {}
    for n, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[n]
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda pair: (-pair[1], order[pair[0]]))


def fuse_passages(
    dense: Sequence[Passage],
    keyword: Sequence[Passage],
    limit: int,
    *,
    query: str | None = None,
    k: int = RRF_K,
) -> list[Passage]:
    """The ``limit`` best of two rankings of one collection's passages by reciprocal rank
    fusion, the keyword ranking weighed for ``query`` (``keyword_weight``; 1 without one);
    each passage scored its fused score and marked with the searches that found it (its
    dense version kept where both did)."""
    by_id = {p.id: p for p in keyword} | {p.id: p for p in dense}
    dense_ids = {p.id for p in dense}
    keyword_ids = {p.id for p in keyword}
    weight = 1.0 if query is None else keyword_weight(query)
    rankings = ([p.id for p in dense], [p.id for p in keyword])
    fused = rrf_fuse(rankings, k, (1.0, weight))[: max(limit, 0)]
    return [
        replace(
            by_id[i],
            score=score,
            found_by=tuple(
                name for name, ids in (("dense", dense_ids), ("keyword", keyword_ids)) if i in ids
            ),
        )
        for i, score in fused
    ]
