"""The ``python-phrases`` evaluation set: a phrase someone remembers from a document, typed as
they remember it, built from the same corpus as ``python-faq``, reproducibly.

Each query is four consecutive words of a document's prose, lowercased: plain words only (no
digits, identifiers or punctuation inside the phrase, so none of them is an exact term), at
least three of them not stopwords. A phrase is kept when it is rare: found, as those four
words in a row, in at least one and at most ``MAX_DOCUMENTS`` documents, all of which are
relevant. ``QUESTIONS`` of them are drawn with a fixed seed (``SEED``), at most one per
document. It measures what the keyword set cannot: a query of plain words, not a question,
that only the words themselves find well.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from dataclasses import replace

from retrieval.eval.python_faq import Dataset, Question
from retrieval.ingest.folder import iter_documents

DATASET = "python-phrases"
QUESTIONS = 200
SEED = 29
MAX_DOCUMENTS = 3
WORDS = 4
_TOKEN = re.compile(r"\S+")
_PLAIN = re.compile(r"[a-z]{2,}")
_STOPWORDS = frozenset(
    (
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "can",
        "for",
        "from",
        "has",
        "have",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "may",
        "more",
        "not",
        "of",
        "on",
        "one",
        "or",
        "so",
        "such",
        "than",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "this",
        "to",
        "was",
        "we",
        "were",
        "when",
        "which",
        "will",
        "with",
        "you",
        "your",
        "also",
        "any",
        "all",
        "each",
        "other",
        "only",
        "use",
        "used",
        "using",
    )
)


def _phrases(text: str) -> set[str]:
    """Every run of ``WORDS`` plain words (in one sentence) in ``text``, lowercased."""
    found: set[str] = set()
    run: list[str] = []
    for token in _TOKEN.findall(text):
        word = token.lower()
        ends = word[-1:] in ".,;:!?)"
        word = word.rstrip(".,;:!?)")
        if not _PLAIN.fullmatch(word):
            run = []
            continue
        run.append(word)
        if len(run) >= WORDS:
            window = run[-WORDS:]
            if sum(w not in _STOPWORDS for w in window) >= WORDS - 1:
                found.add(" ".join(window))
        if ends:
            run = []
    return found


def phrase_dataset(faq: Dataset, *, questions: int = QUESTIONS, seed: int = SEED) -> Dataset:
    """The phrase set over ``faq``'s corpus (see the module's docstring)."""
    holders: dict[str, set[str]] = defaultdict(set)
    for file in iter_documents(faq.corpus_dir):
        source = file.relative_to(faq.corpus_dir).as_posix()
        for phrase in _phrases(file.read_text("utf-8-sig", errors="replace")):
            holders[phrase].add(source)
    by_document: dict[str, list[tuple[str, tuple[str, ...]]]] = defaultdict(list)
    for phrase, sources in sorted(holders.items()):
        if len(sources) <= MAX_DOCUMENTS:
            ordered = tuple(sorted(sources))
            by_document[ordered[0]].append((phrase, ordered))
    rng = random.Random(seed)
    documents = sorted(by_document)
    rng.shuffle(documents)
    picked = []
    for n, document in enumerate(documents[:questions], start=1):
        phrase, holding = rng.choice(by_document[document])
        picked.append(Question(f"phrase-{n:03d}", phrase, holding[0], relevant=holding))
    return replace(faq, name=DATASET, questions=picked)
