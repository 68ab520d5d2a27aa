"""Which passages an answer cites: the model's own ``[n]`` labels, or, when it wrote none,
each answer sentence attributed to the passage that supports it.

Words first: a sentence whose content words decide clearly which passage supports it, or that
none does, is decided by them (``app.stages.lexical``: a few set operations, no model). The
embedder decides the others: attribution embeds those sentences with the question embedder (one
model, already loaded) and gives each to the passage holding the sentence most like it (cosine
similarity of unit vectors), when that similarity reaches the threshold. An answer sentence
given to no passage is unsupported; an answer none of whose sentences is supported is not
grounded. A supported sentence's ``score`` is the share of its content words its passage's
sentence holds where words decided, its cosine similarity where the embedder did.

The threshold (``RAGTIME_ATTRIBUTION_THRESHOLD``, ``DEFAULT_THRESHOLD`` here) was chosen on a
labelled set built from the demo corpus (``bench/suites/attribution/labelled.py``; ``ragtime bench
attribution`` prints the sweep): answer-like sentences taken verbatim or lightly paraphrased from
one passage (they should be attributed to it) and sentences from other documents (they should
not be attributed at all), each given with that passage and related passages of other
documents. On the development set (seed 0, 160 cases, MiniLM) the lowest threshold on a 0.025
grid whose precision reached 0.9 was 0.725 when it was chosen (2026-12-03: precision 0.938,
recall 0.950; 0.6 gave 0.796 / 0.975, 0.8 gave 0.986 / 0.863); on the tests' set (seed 1) 0.725
gave precision 0.938, recall 0.938. docs/studies/attribution.md, "Citation attribution", has both
sweeps and the command, and "issue 60 §1" today's figures, the embedder alone and words first. The
set's positives are near copies of their passage's sentences; a model's paraphrase strays further,
so on real answers the threshold trades recall for precision more than these figures show.

A passage's sentence vectors come from its snapshot, where ingest stored them
(``retrieval.store.sentences``), so a question's attribution embeds only its answer's sentences
that words left open; a passage of a snapshot without them (built before they were stored) has
its sentences embedded here, when some sentence needs the embedder, and kept in a small LRU
cache by its text. ``Attributor.attribute_many`` attributes several answers with one model call
for all their texts (the attribute stage batches concurrent requests' answers);
``Worded`` holds words' verdicts on an answer's sentences (the stage reads them first, and calls
no model when they decide every sentence).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from app.settings import DEFAULT_ATTRIBUTION_THRESHOLD
from app.stages.lexical import Verdict, decide, passage_words
from app.stages.recent import Recent
from retrieval.store.sentences import MIN_WORDS, sentences

__all__ = [
    "MIN_WORDS",
    "Attribution",
    "Attributor",
    "Support",
    "Worded",
    "attribute",
    "labels_in",
    "sentences",
]

#: Chosen on the labelled set of ``bench/suites/attribution/labelled.py`` (see the module
#: docstring).
DEFAULT_THRESHOLD = DEFAULT_ATTRIBUTION_THRESHOLD

#: Passages whose sentence vectors the cache keeps.
CACHE_PASSAGES = 512

_LABEL = re.compile(r"\[(\d{1,3})\]")


def labels_in(text: str) -> set[int]:
    """Every ``[n]`` label the text carries."""
    return {int(m) for m in _LABEL.findall(text)}


@dataclass(frozen=True)
class Support:
    """One answer sentence given to the passage labelled ``label``, with its score (a share of
    words, or a cosine similarity: see the module docstring)."""

    sentence: int
    label: int
    score: float


@dataclass(frozen=True)
class Attribution:
    """Which answer sentences which passages support (``supports``) and which none does, and
    how many of them words decided (``by_words``; the embedder decided the others)."""

    sentences: int
    supports: tuple[Support, ...]
    by_words: int = 0

    @property
    def unsupported(self) -> int:
        return self.sentences - len(self.supports)

    def by_label(self) -> dict[int, float]:
        """Each supporting passage's label and its best score for a sentence it supports."""
        best: dict[int, float] = {}
        for s in self.supports:
            best[s.label] = max(best.get(s.label, -1.0), s.score)
        return best


def attribute(
    answer: np.ndarray, passages: Mapping[int, np.ndarray], threshold: float
) -> Attribution:
    """Give each answer sentence (a row of ``answer``, unit vectors) to the passage (by label,
    its sentences' unit vectors as rows) with the most similar sentence, when the similarity
    reaches ``threshold``."""
    supports = []
    for row, vector in enumerate(answer):
        best_label, best_score = 0, -1.0
        for label, rows in passages.items():
            if len(rows) == 0:
                continue
            score = float(np.max(rows @ vector))
            if score > best_score:
                best_label, best_score = label, score
        if best_label and best_score >= threshold:
            supports.append(Support(row, best_label, round(best_score, 4)))
    return Attribution(len(answer), tuple(supports))


@dataclass(frozen=True)
class Worded:
    """An answer's sentences and the verdicts words gave them, by sentence index (the sentences
    words left open to the embedder are not in ``decided``)."""

    said: tuple[str, ...]
    decided: Mapping[int, Verdict]

    @classmethod
    def of(cls, answer: str, passages: Mapping[int, str]) -> Worded:
        """Words' verdicts on ``answer``'s sentences among ``passages`` (texts, by label)."""
        said = tuple(sentences(answer))
        words = {label: passage_words(text) for label, text in passages.items()}
        verdicts = ((index, decide(sentence, words)) for index, sentence in enumerate(said))
        return cls(said, {index: verdict for index, verdict in verdicts if verdict is not None})

    @property
    def open(self) -> list[int]:
        """The indices of the sentences words left to the embedder."""
        return [index for index in range(len(self.said)) if index not in self.decided]

    def attribution(self, embedded: Sequence[Support] = ()) -> Attribution:
        """The answer's attribution: the sentences words gave to a passage and those the
        embedder did (``embedded``), in the answer's order."""
        supports = [
            Support(index, verdict.label, round(verdict.share, 4))
            for index, verdict in self.decided.items()
            if verdict.label is not None
        ]
        ordered = sorted([*supports, *embedded], key=lambda support: support.sentence)
        return Attribution(len(self.said), tuple(ordered), by_words=len(self.decided))


#: One attribution asked: the answer (or its sentences as words left them), its passages' texts
#: by label, and the sentence vectors kept for some of them (by label).
Ask = tuple[str | Worded, Mapping[int, str], Mapping[int, np.ndarray]]


@dataclass
class _Planned:
    """One attribution before its texts are embedded: the answer's sentences as words left
    them, and, when some sentence is open, each passage's rows where they are known (kept at
    ingest, or cached), or its sentences to embed."""

    worded: Worded
    rows: dict[int, np.ndarray | None] = field(default_factory=dict)
    missing: dict[int, list[str]] = field(default_factory=dict)
    keys: dict[int, str] = field(default_factory=dict)

    @property
    def texts(self) -> list[str]:
        """What the embedder is asked: the open sentences, then the passages' sentences it
        needs (none when words decided every sentence)."""
        left = [self.worded.said[index] for index in self.worded.open]
        if not left:
            return []
        return left + [s for parts in self.missing.values() for s in parts]


class Attributor:
    """Attribution with one embedder (a function from texts to unit row vectors), its passage
    sentences cached by text. Thread-safe."""

    def __init__(
        self,
        embed: Callable[[Sequence[str]], np.ndarray],
        *,
        model: str,
        threshold: float = DEFAULT_THRESHOLD,
        cache_passages: int = CACHE_PASSAGES,
    ) -> None:
        if not -1.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must lie in [-1, 1], got {threshold}")
        self.embed = embed
        self.model = model
        self.threshold = threshold
        self.cache_passages = cache_passages
        self._cache: Recent[str, np.ndarray] = Recent(cache_passages)
        self.cache_hits = 0

    def __call__(
        self,
        answer: str,
        passages: Mapping[int, str],
        stored: Mapping[int, np.ndarray] | None = None,
    ) -> Attribution:
        """Attribute ``answer``'s sentences to ``passages`` (their texts, by label), words first.
        A passage in ``stored`` (its sentence vectors, kept at ingest) is not embedded again:
        only the sentences words left open and the other passages are."""
        return self.attribute_many([(answer, passages, stored or {})])[0]

    def attribute_many(self, asks: Sequence[Ask]) -> list[Attribution]:
        """Each ask's attribution, as ``__call__`` gives it, with one model call for the texts
        of them all: a batch of short texts costs the model less than its texts one by one. No
        call at all when words decide every sentence."""
        planned = [(plan, plan.texts) for plan in (self._plan(*ask) for ask in asks)]
        everything = [text for _, texts in planned for text in texts]
        vectors = self.embed(everything) if everything else None
        attributions, start = [], 0
        for plan, texts in planned:
            if vectors is None or not texts:
                attributions.append(plan.worded.attribution())
                continue
            attributions.append(self._finish(plan, vectors[start : start + len(texts)]))
            start += len(texts)
        return attributions

    def _plan(
        self, answer: str | Worded, passages: Mapping[int, str], stored: Mapping[int, np.ndarray]
    ) -> _Planned:
        worded = answer if isinstance(answer, Worded) else Worded.of(answer, passages)
        plan = _Planned(worded)
        if not worded.open:
            return plan
        for label, text in passages.items():
            if label in stored:
                continue
            key = plan.keys[label] = self._key(text)
            plan.rows[label] = rows = self._cached(key)
            if rows is None:
                plan.missing[label] = sentences(text)
        plan.rows.update((label, stored[label]) for label in passages if label in stored)
        return plan

    def _finish(self, plan: _Planned, vectors: np.ndarray) -> Attribution:
        """The attribution of a plan some of whose sentences the embedder decides, from the
        ``vectors`` of its ``texts``."""
        left = plan.worded.open
        answer_vectors, start = vectors[: len(left)], len(left)
        found: dict[int, np.ndarray] = {}
        for label, parts in plan.missing.items():
            found[label] = vectors[start : start + len(parts)]
            start += len(parts)
            self._store(plan.keys[label], found[label])
        rows = {label: v if v is not None else found[label] for label, v in plan.rows.items()}
        embedded = attribute(answer_vectors, rows, self.threshold).supports
        return plan.worded.attribution(
            [replace(support, sentence=left[support.sentence]) for support in embedded]
        )

    def passage_rows(self, text: str) -> np.ndarray:
        """The unit vectors of a passage's sentences, from the cache or embedded now."""
        key = self._key(text)
        rows = self._cached(key)
        if rows is None:
            rows = self.embed(sentences(text))
            self._store(key, rows)
        return rows

    def _key(self, text: str) -> str:
        return hashlib.blake2b(f"{self.model}\0{text}".encode(), digest_size=16).hexdigest()

    def _cached(self, key: str) -> np.ndarray | None:
        rows = self._cache.get(key)
        if rows is not None:
            self.cache_hits += 1
        return rows

    def _store(self, key: str, rows: np.ndarray) -> None:
        self._cache.put(key, rows)
