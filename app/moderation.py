"""Moderation wiring: screen questions before retrieval, filter answers as they stream.

Questions are scored by the offline profanity/abuse classifier (``alt-profanity-check``, a small
linear SVM); a score at or above the threshold rejects the request. Answers pass through an
``AnswerFilter`` that releases text as soon as it is safe: e-mail addresses, phone numbers and
card numbers are redacted, profane words masked, and only the tail that might still grow into one
of those is held back.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_CARD = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")
# Not inside a longer run of digit groups (a card or an id that failed its own checks).
_PHONE = re.compile(
    r"(?<![\w+])(?<!\d[ .-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?|\d{2,4}[ .-])"
    r"\d{3,4}[ .-]?\d{3,4}(?!\d)(?![ .-]\d)"
)
_WORD = re.compile(r"[A-Za-z][A-Za-z']*")
# Tails that may still become a redactable match once more text arrives.
_PENDING_DIGITS = re.compile(r"[+(]?\d[\d().\- ]*$")
_PENDING_TOKEN = re.compile(r"\S+$")
_MAX_PENDING_CHARS = 48
_WORD_CACHE_SIZE = 50_000


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


class QuestionRejected(Exception):
    """A question the moderation stage will not pass on (mapped to HTTP 400)."""

    status_code = 400

    def __init__(self, score: float) -> None:
        self.score = score
        super().__init__(
            f"the question was rejected by moderation: abusive or profane language "
            f"(score {score:.2f})"
        )


class Moderator:
    """Holds the classifier; cheap to build, ``load()`` imports and warms it."""

    def __init__(self, threshold: float = 0.9) -> None:
        self.threshold = threshold
        self._predict: Callable[[list[str]], Any] | None = None
        self._word_verdicts: dict[str, bool] = {}

    @property
    def loaded(self) -> bool:
        return self._predict is not None

    def load(self) -> None:
        from profanity_check import predict_prob

        predict_prob(["warm up"])
        self._predict = predict_prob

    def scores(self, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        if self._predict is None:
            self.load()
        assert self._predict is not None
        return [float(p) for p in self._predict(list(texts))]

    def profane_words(self, words: set[str]) -> set[str]:
        """The profane ones among ``words``; each word is classified once per process.

        One classifier call costs milliseconds whatever its size, and an answer streams many
        small deltas made of the same few hundred words: the cache keeps the filter cheap.
        """
        unknown = [w for w in words if w not in self._word_verdicts]
        if unknown:
            if len(self._word_verdicts) > _WORD_CACHE_SIZE:
                self._word_verdicts.clear()
            for word, score in zip(unknown, self.scores(unknown), strict=True):
                self._word_verdicts[word] = score >= self.threshold
        return {w for w in words if self._word_verdicts[w]}

    def answer_filter(self) -> AnswerFilter:
        return AnswerFilter(self)


class AnswerFilter:
    """Redacts and masks a streamed answer, releasing text as early as it safely can."""

    def __init__(self, moderator: Moderator) -> None:
        self._moderator = moderator
        self._pending = ""
        self.redactions: Counter[str] = Counter()
        self.elapsed_ms = 0.0

    def feed(self, delta: str) -> str:
        """Take a delta; return the text that can be sent now (possibly "")."""
        started = time.perf_counter()
        self._pending += delta
        cut = self._safe_cut(self._pending)
        released, self._pending = self._pending[:cut], self._pending[cut:]
        out = self._clean(released)
        self.elapsed_ms += (time.perf_counter() - started) * 1000.0
        return out

    def flush(self) -> str:
        """The end of the stream: release everything still held."""
        started = time.perf_counter()
        out = self._clean(self._pending)
        self._pending = ""
        self.elapsed_ms += (time.perf_counter() - started) * 1000.0
        return out

    @staticmethod
    def _safe_cut(text: str) -> int:
        cut = len(text)
        for pattern in (_PENDING_TOKEN, _PENDING_DIGITS):
            match = pattern.search(text)
            if match is not None:
                cut = min(cut, match.start())
        return max(cut, len(text) - _MAX_PENDING_CHARS)

    def _clean(self, text: str) -> str:
        if not text:
            return text
        text = _EMAIL.sub(self._redactor("email"), text)
        text = _CARD.sub(self._card_redactor, text)
        text = _PHONE.sub(self._redactor("phone"), text)
        return self._mask_profanity(text)

    def _redactor(self, kind: str) -> Callable[[re.Match[str]], str]:
        def replace(match: re.Match[str]) -> str:
            self.redactions[kind] += 1
            return f"[{kind} redacted]"

        return replace

    def _card_redactor(self, match: re.Match[str]) -> str:
        digits = re.sub(r"\D", "", match.group())
        if not _luhn_ok(digits):
            return match.group()
        self.redactions["card"] += 1
        return "[card redacted]"

    def _mask_profanity(self, text: str) -> str:
        words = list(_WORD.finditer(text))
        if not words:
            return text
        profane = self._moderator.profane_words({w.group() for w in words})
        flagged = [w for w in words if w.group() in profane]
        for word in reversed(flagged):
            self.redactions["profanity"] += 1
            masked = word.group()[0] + "*" * (len(word.group()) - 1)
            text = text[: word.start()] + masked + text[word.end() :]
        return text
