"""Hybrid search: reciprocal rank fusion of a dense and a keyword (BM25) ranking.

``fuse_passages`` merges the two rankings of one collection's passages by reciprocal rank
(``rrf_fuse``), the keyword ranking at the weight ``keyword_weight`` gives the query: a short
query typed to be found by its words (an identifier, an option, a number, a phrase) brings it
in at ``KEYWORD_WEIGHT``; a longer query or a question is searched by its meaning alone unless
it holds an exact term (``exact_terms``, read with the index's own splitter,
``bm25.split_tokens``), which brings the keyword ranking in at a weight in proportion to how
rare that term is in the collection (BM25's own IDF, ``KeywordIndex.rarity``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from retrieval.search.bm25 import split_tokens
from retrieval.search.passages import Passage

#: The usual constant of reciprocal rank fusion (Cormack et al., 2009).
RRF_K = 60
#: What makes a query's token an exact term, typed to be found as written: a leading dash
#: (``--verbose``), a dotted name (``os.path.join``), an underscore (``__slots__``), a digit
#: (``3.11``, ``RS232``), or inner capitals (``UnicodeDecodeError``, ``CPython``). Hyphenated
#: prose (``thread-safe``) and ``e.g`` are not.
_EXACT = re.compile(r"^-{1,2}[A-Za-z]|\w\.\w\w|_|\d|[a-z][A-Z]|^[A-Z]{2,}\w*[a-z]")
_ABBREVIATION = re.compile(r"[A-Za-z]\.[A-Za-z]")
#: The keyword ranking's weight in hybrid fusion, for a query typed to be found by its words
#: (``keyword_weight``): twice the dense one's; none for any other query (the dense order
#: stands). Chosen on ``ragtime eval retrieval`` over three sets (docs/studies/retrieval.md, "Hybrid
#: retrieval"): BM25 over the FAQ's prose questions lowered their nDCG@10 at any weight (0.730
#: dense; 0.706 at 0.1, 0.580 at 1), while typed keywords and remembered phrases need it; at 2 the
#: FAQ keeps dense's 0.7304, at 3 it falls to 0.7284.
KEYWORD_WEIGHT = 2.0
#: The most words (split at white space) of a query that brings the keyword ranking in: what is
#: typed into a search box (``os.path.join``, ``OSError: [Errno 9] Bad file descriptor``, a
#: phrase remembered from a clause), not a question. At 6 the FAQ's nDCG@10 equals dense's;
#: at 7 it is lower (0.727).
SHORT_QUERY_WORDS = 6
#: The most weight the keyword ranking has for a longer query or a question that names an exact
#: term (``weight x`` how rare its exact terms are, 1 for a term one chunk holds): chosen on
#: ``ragtime eval retrieval`` over five sets (docs/studies/retrieval.md, "Retrieval without a
#: trained reranker"): at 0.5 the Python keyword set rose from 0.923 to 0.941 nDCG@10 and the FAQ
#: fell 0.0025; at 1 the FAQ fell 0.0074; every term alike, rare or not, at 0.5: 0.0032.
EXACT_TERM_WEIGHT = 0.5
#: A question, by its mark or its first word: searched by its meaning unless it holds an exact
#: term.
_QUESTION = re.compile(
    r"\?\s*$|^\W*(?:who|what|when|where|why|how|which|can|could|should|shall|is|are|was|were|"
    r"do|does|did|will|would|may|might|must)\b",
    re.IGNORECASE,
)


def exact_terms(query: str) -> list[str]:
    """The tokens of ``query`` (as typed, case kept) that are exact terms (``_EXACT``)."""
    return [
        token
        for token in split_tokens(query)
        if _EXACT.search(token) and not _ABBREVIATION.fullmatch(token)
    ]


def keyword_weight(query: str, rarity: Callable[[str], float] | None = None) -> float:
    """The keyword ranking's weight in hybrid fusion for ``query``: ``KEYWORD_WEIGHT`` for a
    query of at most ``SHORT_QUERY_WORDS`` words that holds an exact term or is not a question
    (a name, a date, a phrase from a clause); for any other query that holds an exact term, in
    proportion to how distinctive its exact terms are in the collection searched
    (``EXACT_TERM_WEIGHT`` times ``rarity`` of them: ``KeywordIndex.rarity``, BM25's own IDF);
    else 0, as without ``rarity``."""
    if not query.strip():
        return 0.0
    terms = exact_terms(query)
    if len(query.split()) <= SHORT_QUERY_WORDS and (terms or not _QUESTION.search(query)):
        return KEYWORD_WEIGHT
    if terms and rarity is not None:
        return EXACT_TERM_WEIGHT * rarity(" ".join(terms))
    return 0.0


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
    keyword_weight: float = 1.0,
    k: int = RRF_K,
) -> list[Passage]:
    """The ``limit`` best of two rankings of one collection's passages by reciprocal rank
    fusion, the keyword ranking at ``keyword_weight`` (a query's is ``keyword_weight(query)``)
    and the dense one at 1; each passage scored its fused score and marked with the searches
    that found it (its dense version kept where both did)."""
    by_id = {p.id: p for p in keyword} | {p.id: p for p in dense}
    dense_ids = {p.id for p in dense}
    keyword_ids = {p.id for p in keyword}
    rankings = ([p.id for p in dense], [p.id for p in keyword])
    fused = rrf_fuse(rankings, k, (1.0, keyword_weight))[: max(limit, 0)]
    return [
        replace(
            by_id[i],
            score=score,
            score_kind="rrf",
            found_by=tuple(
                name for name, ids in (("dense", dense_ids), ("keyword", keyword_ids)) if i in ids
            ),
        )
        for i, score in fused
    ]
