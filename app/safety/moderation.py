"""Moderation wiring: screen questions before retrieval, filter answers as they stream.

Questions are scored by the offline profanity/abuse classifier (``alt-profanity-check``, a small
linear SVM); a score at or above the threshold rejects the request. Answers pass through an
``AnswerFilter`` that releases text as soon as it is safe: personal data and secrets are redacted
(``app.safety.redaction``: e-mail, phone, card, IBAN, SSN, API keys and tokens, private keys),
profane words masked, and only the tail that might still grow into one of those is held back.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from app.safety.redaction import PRIVATE_KEY_BEGIN, PRIVATE_KEY_END, redact

_WORD = re.compile(r"[A-Za-z][A-Za-z']*")
# Tails that may still become a redactable match once more text arrives: digits (a card, a phone,
# an SSN), the last word (an e-mail, a key), an IBAN's groups, "Bearer " before its token, and
# the start of a private key's BEGIN line.
_PENDING_DIGITS = re.compile(r"[+(]?\d[\d().\- ]*$")
_PENDING_TOKEN = re.compile(r"\S+$")
_PENDING_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}[A-Z0-9 ]{0,40}$")
_PENDING_LABEL = re.compile(
    r"(?i:\b(?:bearer|ssn|api[_-]?key|access[_-]?key|auth[_-]?token|token|secret|password|passwd"
    r"|pwd)[\"']?\s{0,2}[:=]?\s{0,2}[\"']?\S*)$"
)
_PENDING_KEY = re.compile(r"-----BEGIN[A-Z0-9 ]*-{0,5}$")
_MAX_PENDING_CHARS = 128
# While inside a private key block, the tail kept to find its END line across deltas.
_KEY_END_TAIL = 48
_WORD_CACHE_SIZE = 50_000


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
        from profanity_check.profanity_check import model, vectorizer

        from app.safety.profanity_scorer import compile_scorer

        predict = compile_scorer(vectorizer, model, predict_prob)
        predict(["warm up"])
        self._predict = predict

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
    """Redacts and masks a streamed answer, releasing text as early as it safely can.

    Redaction is ``app.safety.redaction``'s (personal data, secrets). A private key block is dropped
    as it streams, from its BEGIN line to its END line (or the end of the answer), however long.
    """

    def __init__(self, moderator: Moderator) -> None:
        self._moderator = moderator
        self._pending = ""
        self._in_private_key = False
        self.redactions: Counter[str] = Counter()
        self.elapsed_ms = 0.0

    def feed(self, delta: str) -> str:
        """Take a delta; return the text that can be sent now (possibly "")."""
        started = time.perf_counter()
        self._pending += delta
        out = self._release()
        self.elapsed_ms += (time.perf_counter() - started) * 1000.0
        return out

    def flush(self) -> str:
        """The end of the stream: release everything still held."""
        started = time.perf_counter()
        if self._in_private_key:  # a key block that never ended: all of it goes
            self._pending, self._in_private_key = "", False
        out = self._clean(self._pending)
        self._pending = ""
        self.elapsed_ms += (time.perf_counter() - started) * 1000.0
        return out

    def _release(self) -> str:
        out: list[str] = []
        while True:
            if self._in_private_key:
                end = PRIVATE_KEY_END.search(self._pending)
                if end is None:
                    self._pending = self._pending[-_KEY_END_TAIL:]
                    return "".join(out)
                self._pending, self._in_private_key = self._pending[end.end() :], False
            begin = PRIVATE_KEY_BEGIN.search(self._pending)
            if begin is None:
                break
            out.append(self._clean(self._pending[: begin.start()]) + "[private_key redacted]")
            self.redactions["private_key"] += 1
            self._pending, self._in_private_key = self._pending[begin.end() :], True
        cut = self._safe_cut(self._pending)
        released, self._pending = self._pending[:cut], self._pending[cut:]
        out.append(self._clean(released))
        return "".join(out)

    @staticmethod
    def _safe_cut(text: str) -> int:
        cut = len(text)
        for pattern in (_PENDING_TOKEN, _PENDING_DIGITS, _PENDING_IBAN, _PENDING_LABEL):
            match = pattern.search(text)
            if match is not None:
                cut = min(cut, match.start())
        cut = max(cut, len(text) - _MAX_PENDING_CHARS)
        key = _PENDING_KEY.search(text)  # never release half a BEGIN line
        return min(cut, key.start()) if key is not None else cut

    def _clean(self, text: str) -> str:
        if not text:
            return text
        return self._mask_profanity(redact(text, self.redactions))

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
