"""Whether an answer is grounded: judged on what it says beyond the question's own words.

An answer's **terms** are its words of three letters or more that are not stop words, and its
numbers, lower-cased, a plural's ``s`` dropped (``lists`` is ``list``). Its **new terms** are
those the question does not hold: what the answer adds. An answer is grounded when it adds
something, it is not a refusal, and at least ``GROUNDED_SHARE`` of its new terms occur among
the terms of the passages the prompt held. So an echo of the question adds nothing and is not
grounded; "812." is grounded when a passage says 812; a fluent answer about something else is
not, however alike its sentences sound to the passages (the embedding similarity that finds
citations, ``app.stages.citations``, scored an echo 0.97).

The share was chosen on a labelled set of answers built from ``demo/answers`` (``ragtime bench
attribution --grounding``: correct references, short extractive answers, other questions'
answers, echoes and refusals over each question's own passages; docs/studies/answers.md, "Grounded",
has the sweep): 0.5 is the lowest share at which neither half of the set has a false ``grounded:
true`` (recall 0.951 and 0.976); 0.3 is the lowest whose precision reaches 0.9 (0.930), too close
for real answers, which ramble more than these. It is a lexical rule: a correct paraphrase in other
words is missed (recall), which keeps ``grounded: true`` worth trusting (precision).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

#: The least share of an answer's new terms the passages must hold (see the module docstring).
GROUNDED_SHARE = 0.5
#: Passages whose terms are kept (a few MB at most).
PASSAGES_KEPT = 1024

_TERM = re.compile(r"[a-z_][a-z0-9_]{2,}|\d+(?:\.\d+)?")
_STOP_WORDS = """
the and for are but not you your yours can could will would should shall may might must this
that these those there here what which who whom whose when where why how with without from into
onto upon about above below over under again then than too very also just only use used using
uses does did doing done has have had having was were been being its it's our ours their theirs
them they she her his him one two all any each few more most other some such nor own same out
off yes example examples like want need way ways make makes made get gets got let lets thing
things something anything everything answer question passage passages following say says said
see
"""
_STOP = frozenset(_STOP_WORDS.split())

_NEGATION = r"(?:don'?t|do not|cannot|can'?t|could not|couldn'?t|unable to|not able to|am not sure)"
#: A reply that says the documents do not answer (the system prompt asks for "say that you
#: don't know"); ``ragtime eval answers`` counts refusals by the same pattern.
REFUSAL = re.compile(
    rf"\b{_NEGATION} (?:\w+ )?(?:know|answer|find|tell|determine|say|provide)"
    r"|\b(?:passages?|documents?|context|text|sources?) (?:provided )?(?:do|does|did) not "
    r"(?:contain|mention|say|include|provide|cover|answer|specify)"
    r"|\bno (?:information|answer|mention|details?) (?:about|on|of|in|for|is|was|to)"
    r"|\bnot (?:mentioned|covered|provided|specified|answered|found) in the "
    r"(?:passages?|documents?|context|text|sources?)",
)
_LABEL = re.compile(r"\[\d{1,3}\]")
_QUOTES = re.compile(r"[`\"\u201c\u201d]")
_SPACE = re.compile(r"\s+")


def is_refusal(text: str) -> bool:
    """Whether the text says the documents do not answer (quotes and case aside)."""
    plain = _SPACE.sub(" ", _QUOTES.sub("", text.lower().replace("\u2019", "'")))
    return bool(REFUSAL.search(plain))


def terms(text: str) -> set[str]:
    """The words and numbers that carry content (see the module docstring); ``[n]`` labels
    are not content."""
    found = set()
    for term in _TERM.findall(_LABEL.sub(" ", text.lower())):
        if term in _STOP:
            continue
        if len(term) > 4 and term.endswith("s") and not term.endswith("ss"):
            term = term[:-1]
        found.add(term)
    return found


@dataclass(frozen=True)
class Grounding:
    """The judgement on one answer: its new terms and how many of them the passages hold."""

    new_terms: int
    supported: int
    refusal: bool

    @property
    def share(self) -> float:
        return self.supported / self.new_terms if self.new_terms else 0.0

    @property
    def grounded(self) -> bool:
        return self.share_at(GROUNDED_SHARE)

    def share_at(self, least: float) -> bool:
        """Whether it would be grounded were the least share ``least``."""
        return not self.refusal and self.new_terms > 0 and self.share >= least


@functools.lru_cache(maxsize=PASSAGES_KEPT)
def passage_terms(text: str) -> frozenset[str]:
    """``terms`` of a passage's prompt text, kept while it recurs (the same passages answer
    many questions; reading five of them is most of a judgement's time)."""
    return frozenset(terms(text))


def judge(question: str, answer: str, passages: Iterable[str]) -> Grounding:
    """Whether ``answer`` to ``question`` is grounded in ``passages`` (their prompt texts)."""
    new = terms(answer) - terms(question)
    held = [passage_terms(text) for text in passages]
    supported = sum(any(term in kept for kept in held) for term in new)
    return Grounding(len(new), supported, is_refusal(answer))
