"""Attribution by words: an answer sentence given to a passage, or to none, by the content words
it shares with the passages, where the words decide it clearly; the embedder
(``app.stages.citations``) decides the others.

A sentence's **terms** are the grounding judgement's (``app.stages.grounding.terms``: words of
three letters or more that are not stop words, and numbers, lower-cased, a plural's ``s``
dropped). Words decide that a sentence is

- **supported** by a passage when it has at least ``SUPPORTED_MIN_TERMS`` terms, a sentence of
  that passage holds at least ``SUPPORTED_SHARE`` of them, and the best sentence of every other
  passage holds a share at least ``SUPPORTED_MARGIN`` smaller (the margin between the best
  passage and the second);
- **unsupported** when no passage holds any of its terms, or when it has three terms or more
  and no passage holds more than one of them (``UNSUPPORTED_MOST_HELD``);

and leave every other sentence to the embedder's cosine similarity and its threshold.

The rules were chosen by measurement (docs/studies/attribution.md, "issue 60 §1"; no set below was
held out of the choice). On the labelled sets of ``bench/suites/attribution/labelled.py`` (seeds 0
and 1, 160 cases each, MiniLM) words first and the embedder for the rest give precision and recall
no lower than the embedder alone (0.963 / 0.975 against 0.959 / 0.887 on seed 0, 0.940 / 0.988
against 0.936 / 0.912 on seed 1): a span of a passage's sentence is its words, however far its
vector strays from the whole sentence's. On the 433 sentences of 74 answers SmolLM2-135M wrote to
the demo questions, words decided 118, each as the embedder alone did. A model's paraphrase shares
few of its passage's words, so words decide few of a generated answer's supported sentences (6 of
the 71 the embedder gave a passage) and many of those that say nothing of the passages (code,
filler, another topic): the embedder still weighs most generated answers, on fewer sentences. An
answer with nothing to attribute in words (the null backend's "ok ok ok") calls no model at all.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from app.stages.grounding import PASSAGES_KEPT, passage_terms, terms
from retrieval.store.sentences import sentences

#: The least terms a sentence needs for words to give it to a passage.
SUPPORTED_MIN_TERMS = 4
#: The least share of its terms one sentence of the passage must hold.
SUPPORTED_SHARE = 0.8
#: By how much that share must lead the best share in any other passage.
SUPPORTED_MARGIN = 0.2
#: No passage holding more of its terms than this, a sentence of three terms or more is
#: supported by none.
UNSUPPORTED_MOST_HELD = 1


@dataclass(frozen=True)
class PassageWords:
    """A passage's terms, whole and sentence by sentence (``sentences``, as attribution splits
    it)."""

    terms: frozenset[str]
    sentences: tuple[frozenset[str], ...]


@dataclass(frozen=True)
class Verdict:
    """What words decided for one answer sentence: the label of the passage that supports it
    (None: none does), and the share of the sentence's terms that passage's best sentence holds
    (when none supports it: the share the passage holding most of them holds, whole)."""

    label: int | None
    share: float


@functools.lru_cache(maxsize=PASSAGES_KEPT)
def passage_words(text: str) -> PassageWords:
    """The terms of a passage's prompt text, kept while it recurs (the same passages answer many
    questions)."""
    return PassageWords(passage_terms(text), tuple(frozenset(terms(s)) for s in sentences(text)))


def decide(sentence: str, passages: Mapping[int, PassageWords]) -> Verdict | None:
    """Words' verdict on ``sentence`` among ``passages`` (by label), or None when they do not
    decide it clearly (see the module docstring)."""
    said = terms(sentence)
    held = max((len(said & p.terms) for p in passages.values()), default=0)
    if held == 0 or (len(said) >= 3 and held <= UNSUPPORTED_MOST_HELD):
        return Verdict(None, held / len(said) if said else 0.0)
    if len(said) < SUPPORTED_MIN_TERMS:
        return None
    shares = {
        label: max((len(said & s) / len(said) for s in p.sentences), default=0.0)
        for label, p in passages.items()
    }
    best = max(shares, key=lambda label: shares[label])
    second = max((share for label, share in shares.items() if label != best), default=0.0)
    if shares[best] >= SUPPORTED_SHARE and shares[best] - second >= SUPPORTED_MARGIN:
        return Verdict(best, shares[best])
    return None
