"""The question classifier of the router: ordered regex rules and a length threshold.

Rules are tried in order; the first whose pattern matches (case-insensitively, anywhere in the
question) names the pool. Before the rules, a question of at least ``long_chars`` characters
goes to ``long_pool``: a long question is usually a reasoning one. A question nothing matches
goes to ``default_pool``. The reason never quotes the question (it can be private), only the
rule that matched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Reasoning first (so "what is X and why" is reasoning), then lookups and short extraction.
DEFAULT_RULES: tuple[tuple[str, str], ...] = (
    ("large", r"\bwhy\b"),
    ("large", r"\bexplain"),
    ("large", r"\bcompar"),
    ("large", r"\bhow (does|do|did|would|could|can|should)\b.*\bwork"),
    ("large", r"\b(difference|trade-?offs?|pros and cons|reason|prove|derive|step by step)\b"),
    ("small", r"\bwhat (is|are|was|were)\b"),
    ("small", r"\b(list|define|definition|when|who|where|which|name)\b"),
    ("small", r"\bsummari[sz]e|\bsummary\b|\btl;?dr\b"),
)
DEFAULT_LONG_CHARS = 300


@dataclass(frozen=True)
class Classification:
    pool: str
    detail: str
    """Which rule decided, e.g. ``rule 'large' /\\bwhy\\b/``; never the question's text."""


class QuestionClassifier:
    """``classify(question) -> Classification``; cheap, stateless, thread-safe."""

    def __init__(
        self,
        rules: Sequence[tuple[str, str]] = DEFAULT_RULES,
        *,
        long_chars: int | None = DEFAULT_LONG_CHARS,
        long_pool: str = "large",
        default_pool: str = "small",
    ) -> None:
        if long_chars is not None and long_chars < 1:
            raise ValueError(f"long_chars must be >= 1 or None, got {long_chars}")
        compiled: list[tuple[str, re.Pattern[str]]] = []
        for pool, pattern in rules:
            try:
                compiled.append((pool, re.compile(pattern, re.IGNORECASE)))
            except re.error as exc:
                raise ValueError(f"route rule {pattern!r} is not a valid regex: {exc}") from exc
        self.rules = compiled
        self.long_chars = long_chars
        self.long_pool = long_pool
        self.default_pool = default_pool

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> QuestionClassifier:
        """From ``route_rules``: ``{"rules": [[pool, regex], ...], "long_chars": N | null,
        "long_pool": ..., "default_pool": ...}``; a missing key keeps its default."""
        config = dict(config or {})
        unknown = set(config) - {"rules", "long_chars", "long_pool", "default_pool"}
        if unknown:
            raise ValueError(f"route_rules has unknown keys: {sorted(unknown)}")
        raw = config.get("rules", DEFAULT_RULES)
        if not isinstance(raw, list | tuple) or not all(
            isinstance(r, list | tuple) and len(r) == 2 and all(isinstance(x, str) for x in r)
            for r in raw
        ):
            raise ValueError('route_rules "rules" must be a list of [pool, regex] pairs')
        return cls(
            [(str(p), str(x)) for p, x in raw],
            long_chars=config.get("long_chars", DEFAULT_LONG_CHARS),
            long_pool=str(config.get("long_pool", "large")),
            default_pool=str(config.get("default_pool", "small")),
        )

    @property
    def pools(self) -> set[str]:
        """Every pool a question can be sent to."""
        return {p for p, _ in self.rules} | {self.long_pool, self.default_pool}

    def classify(self, question: str) -> Classification:
        question = question.strip()
        if self.long_chars is not None and len(question) >= self.long_chars:
            return Classification(self.long_pool, f"long question (>= {self.long_chars} chars)")
        for pool, pattern in self.rules:
            if pattern.search(question):
                return Classification(pool, f"rule {pool!r} /{pattern.pattern}/")
        return Classification(self.default_pool, "no rule matched")
