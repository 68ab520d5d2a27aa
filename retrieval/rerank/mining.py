"""The training pairs of ``retrieval.rerank.training``, mined from a collection's own chunks.

Queries are section headings (numbering stripped) and each chunk's first sentence. In the
collection being trained for, a heading that is a question (ends with "?", as the FAQ's are:
the evaluation's questions) is never a query; in a collection mined only for more pairs (the
Debian FAQ, say: ``allow_question_headings``) its questions are the best queries it has. No
query whose embedding lies within ``exclude_similarity`` of an excluded question is kept. A
query's positive is its own chunk (for a first sentence, with that sentence taken out, so the
pair is not a verbatim match); its candidates are the ranking the service would give it: the
FAISS neighbours fused with the BM25 hits by reciprocal rank, as hybrid search fuses them
(``retrieval.search.fusion.fuse_passages``; dense only without a keyword search), and the hard
negatives are those from other sources or sections. Sections, not single queries, are held
out.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from retrieval.embedding.embedder import Embedder
from retrieval.errors import UnknownCollection
from retrieval.formats.document import first_section
from retrieval.search.fusion import fuse_passages, keyword_weight
from retrieval.search.passages import Passage
from retrieval.store.document_store import DocumentStore

_NUMBERING = re.compile(r"^\s*(?:\d+(?:\.\d+)*\.?|[A-Z]\.)\s+")
_SENTENCE = re.compile(r"^(.{10,}?[.!?])\s+(?=[A-Z(\"'`])", re.S)
_WORD = re.compile(r"\w+")
_CODE_START = (">>>", "...", "$", "def ", "class ", "import ", "from ", "#", "{", "[", "(")


@dataclass(frozen=True)
class MinedQuery:
    """A training or held-out query and the chunk it was mined from."""

    text: str
    kind: str  # "heading" or "sentence"
    source: str
    section: str
    positive_id: int
    positive_text: str  # the chunk's text as the reranker sees it (a first sentence removed)
    removed: str = ""  # the sentence taken out of the positive's stored text ("" for headings)

    @property
    def group(self) -> tuple[str, str]:
        return (self.source, self.section)


@dataclass
class MinedSet:
    """Queries with their candidates, and what was left out and why."""

    queries: list[MinedQuery]
    candidates: dict[str, list[Passage]]  # query text -> its search hits, best first
    excluded_questions: int = 0  # queries left out as (close to) evaluation questions
    question_headings: int = 0  # headings left out for ending with "?"

    def negatives(self, query: MinedQuery, n: int) -> list[Passage]:
        """The query's first ``n`` candidates from another source or section."""
        hits = self.candidates.get(query.text, [])
        return [p for p in hits if (p.source, first_section(p.section)) != query.group][:n]

    def merged(self, other: MinedSet) -> MinedSet:
        """This set and ``other``'s queries (a query text already here is not taken again)."""
        fresh = [q for q in other.queries if q.text not in self.candidates]
        return MinedSet(
            self.queries + fresh,
            self.candidates | {q.text: other.candidates[q.text] for q in fresh},
            self.excluded_questions + other.excluded_questions,
            self.question_headings + other.question_headings,
        )


@dataclass(frozen=True)
class TrainOptions:
    """How far the trainer goes; the defaults train in a few minutes on 2 free cores."""

    max_queries: int = 400
    negatives: int = 3
    epochs: int = 1
    max_steps: int = 60
    batch_queries: int = 4  # queries per step, each with 1 + ``negatives`` pairs
    max_length: int = 160
    learning_rate: float = 8e-5
    head_learning_rate: float = 1e-3
    holdout: float = 0.15
    max_holdout_queries: int = 60
    candidates: int = 20
    max_minutes: float = 10.0
    seed: int = 0
    exclude_similarity: float = 0.8
    threads: int = 2
    fused_negatives: bool = True  # candidates from hybrid search (dense + BM25), as served
    eval_every: int = 0  # steps between held-out checks (0: none; train to the end)
    patience: int = 3  # checks without a better held-out nDCG@10 before training stops

    def __post_init__(self) -> None:
        for name in (
            "max_queries",
            "epochs",
            "max_steps",
            "batch_queries",
            "candidates",
            "max_holdout_queries",
            "patience",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.negatives < 1:
            raise ValueError(f"negatives must be at least 1, got {self.negatives}")
        if not 16 <= self.max_length <= 512:
            raise ValueError(f"max_length must be 16-512 tokens, got {self.max_length}")
        if not 0.0 < self.holdout < 1.0:
            raise ValueError(f"holdout must be a share between 0 and 1, got {self.holdout}")
        if self.max_minutes <= 0:
            raise ValueError(f"max_minutes must be positive, got {self.max_minutes}")
        if self.eval_every < 0:
            raise ValueError(f"eval_every must be 0 (off) or more, got {self.eval_every}")


# -- the store, in one place -------------------------------------------------------------------


def collection_passages(store: DocumentStore, embedder: Embedder, collection: str) -> list[Passage]:
    """Every chunk of ``collection``, in id order (the one place this module reads the store).

    Uses only public ``DocumentStore`` methods: a search for as many hits as the collection
    holds, which the exact (flat) index answers with every chunk.
    """
    count = store.collections().get(collection, 0)
    if not count:
        raise UnknownCollection.named(collection, list(store.collections()))
    probe = embedder.embed(["a"])[0]
    passages = store.search(collection, probe, count)
    return sorted(passages, key=lambda p: p.id)


# -- mining ------------------------------------------------------------------------------------


def _heading_query(section: str) -> str | None:
    text = _NUMBERING.sub("", section).strip().strip(":").strip()
    if len(_WORD.findall(text)) < 2:
        return None
    return text


def _first_sentence(text: str) -> tuple[str, str] | None:
    """(first sentence, the rest) of a prose chunk, or ``None`` when it has no usable one."""
    stripped = text.strip()
    if stripped.startswith(_CODE_START):
        return None
    match = _SENTENCE.match(stripped)
    if match is None:
        return None
    sentence = " ".join(match.group(1).split())
    rest = stripped[match.end() :].strip()
    if not 5 <= len(_WORD.findall(sentence)) <= 40 or len(_WORD.findall(rest)) < 20:
        return None
    return sentence, rest


def _normalise(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def mine_queries(
    passages: Sequence[Passage],
    *,
    embedder: Embedder,
    search: Callable[[np.ndarray, int], list[Passage]],
    keyword_search: Callable[[str, int], list[Passage]] | None = None,
    exclude_questions: Sequence[str] = (),
    allow_question_headings: bool = False,
    options: TrainOptions = TrainOptions(),
) -> MinedSet:
    """Mine queries, positives and candidates from ``passages`` (one collection's chunks).

    ``search(vector, k)`` is the collection's nearest-neighbour search, ``keyword_search(text,
    k)`` its BM25 search: with both (and ``options.fused_negatives``) a query's candidates are
    the two fused as hybrid search fuses them. ``allow_question_headings``: a heading ending in
    "?" is a query too (for a collection that is not the evaluation's).
    """
    sections: dict[tuple[str, str], list[Passage]] = {}
    for p in passages:
        sections.setdefault((p.source, first_section(p.section)), []).append(p)
    queries: list[MinedQuery] = []
    seen: set[str] = set()
    question_headings = 0

    def add(query: MinedQuery) -> None:
        key = _normalise(query.text)
        if key and key not in seen:
            seen.add(key)
            queries.append(query)

    for (source, section), chunks in sections.items():
        if section.strip().endswith("?") and not allow_question_headings:
            question_headings += 1
        else:
            heading = _heading_query(section)
            if heading is not None:
                first = chunks[0]
                add(MinedQuery(heading, "heading", source, section, first.id, first.text))
        for chunk in chunks:
            split = _first_sentence(chunk.text)
            if split is not None:
                sentence, rest = split
                add(MinedQuery(sentence, "sentence", source, section, chunk.id, rest, sentence))

    excluded = 0
    if exclude_questions and queries:
        asked = {_normalise(q) for q in exclude_questions}
        q_vecs = embedder.embed([q.text for q in queries])
        e_vecs = embedder.embed(list(exclude_questions))
        closest = (q_vecs @ e_vecs.T).max(axis=1)
        kept = []
        for query, similarity in zip(queries, closest, strict=True):
            if similarity >= options.exclude_similarity or _normalise(query.text) in asked:
                excluded += 1
            else:
                kept.append(query)
        queries = kept

    rng = random.Random(options.seed)
    rng.shuffle(queries)
    queries = queries[: options.max_queries]
    candidates: dict[str, list[Passage]] = {}
    if queries:
        vectors = embedder.embed([q.text for q in queries])
        by_words = keyword_search if options.fused_negatives else None
        for query, vector in zip(queries, vectors, strict=True):
            hits = search(vector, options.candidates)
            if by_words is not None:
                keyword = by_words(query.text, options.candidates)
                hits = fuse_passages(
                    hits, keyword, options.candidates, keyword_weight=keyword_weight(query.text)
                )
            candidates[query.text] = hits
    return MinedSet(queries, candidates, excluded, question_headings)


def split_holdout(
    queries: Sequence[MinedQuery], fraction: float, seed: int
) -> tuple[list[MinedQuery], list[MinedQuery]]:
    """(train, held out): whole sections held out, about ``fraction`` of the queries."""
    groups = sorted({q.group for q in queries})
    random.Random(seed).shuffle(groups)
    target = math.ceil(len(queries) * fraction) if fraction > 0 else 0
    held: set[tuple[str, str]] = set()
    count = 0
    by_group: dict[tuple[str, str], int] = {}
    for q in queries:
        by_group[q.group] = by_group.get(q.group, 0) + 1
    for g in groups:
        if count >= target:
            break
        held.add(g)
        count += by_group[g]
    train = [q for q in queries if q.group not in held]
    return train, [q for q in queries if q.group in held]


def candidate_text(query: MinedQuery, passage: Passage) -> str:
    """A candidate's text as the reranker sees it: the query's own sentence taken out."""
    if passage.id == query.positive_id:
        return query.positive_text
    return passage.text
