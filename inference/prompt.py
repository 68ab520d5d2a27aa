"""Prompt assembly: fit ranked passages into a token budget and render the model's chat prompt.

The layout runs from most to least shared, so that prefix caching (llama.cpp's KV reuse,
SGLang's RadixAttention) reuses as much as possible between requests:

1. the system message: ``DEFAULT_SYSTEM_PROMPT``, byte-identical on every request;
2. one user message: the passages labelled ``[1]``, ``[2]``, ... in rank order,
   then the question, last.

Passages are packed in order while their token counts (measured with the model's own tokenizer)
fit the context budget. The first one that does not fit whole is cut at a sentence boundary and
marked truncated (dropped if not even its first sentence fits); every later one is dropped. The
question is always included and never counts against the budget. Same inputs, same bytes.

**Pruning** (``assemble(..., pieces=...)``): each passage comes as pieces, a sentence each, scored
by how close each is to the question. The context is filled in rounds: each round gives every
passage, in rank order, its next best sentence with the sentences on either side of it (or fewer
of them, when all three do not fit), until the budget is spent. A passage shows its chosen
sentences in their own order, `` … `` where some were left out; passages none of whose sentences
fit are dropped. Unscored pieces (too short to weigh, or a passage without sentence vectors) are
taken in their order after the scored ones. So a small context holds what each passage says about
the question instead of the first passages whole.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from inference.tokenizer import PromptTokenizer

DEFAULT_SYSTEM_PROMPT = (
    "Answer the question using only the numbered passages in the user's message. "
    "Cite the passages you use by their numbers, like [1]. "
    "If the passages do not contain the answer, say that you don't know."
)

_SEPARATOR = "\n\n"
#: Between the section paths of a passage that spans several (``retrieval``'s chunks say so).
SECTIONS_SEPARATOR = " | "
PromptLayout = Literal["shared_prefix_first", "question_first"]
"""``shared_prefix_first`` is ragtime's layout; ``question_first`` is the naive one, kept so the
two can be measured side by side (``RAGTIME_PROMPT_LAYOUT``)."""
_NO_PASSAGES = "No passages were found."
NO_PASSAGES_BLOCK = _NO_PASSAGES + _SEPARATOR
"""What a prompt holds in place of passages when there are none."""
_GAP = " … "
"""Between the sentences of a pruned passage that were not next to each other."""
# A sentence ends at . ! or ? followed by whitespace (or the end), or at a newline.
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")
_NEVER = re.compile(r"(?!)")  # a tokenizer without special tokens


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many tokens two prompts share from their start: what a prefix cache can reuse."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class ContextPassage(Protocol):
    """What a retrieved passage must offer; ``retrieval.Passage`` satisfies it structurally."""

    @property
    def text(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def section(self) -> str: ...

    @property
    def source(self) -> str: ...


class ScoredText(Protocol):
    """A piece of a passage for pruning (``retrieval.store.sentences.ScoredPiece`` fits)."""

    @property
    def text(self) -> str: ...

    @property
    def score(self) -> float | None: ...


@dataclass(frozen=True)
class PromptPassage:
    label: int
    """1-based: the ``[n]`` the model is told to cite."""
    passage: ContextPassage
    text: str
    """The text placed in the prompt, possibly cut short."""
    tokens: int
    """Tokens this passage takes in the prompt: its header, text and separator."""
    truncated: bool
    """Cut short, or pruned to some of its sentences."""


@dataclass(frozen=True)
class AssembledPrompt:
    text: str
    token_ids: list[int]
    prompt_tokens: int
    passages: list[PromptPassage]
    dropped: int
    context_tokens_budget: int
    context_tokens_used: int
    question: str = ""
    """The question as asked (stripped), for a router that picks a model by it; "" when the
    prompt was built by other means."""
    pruned: bool = False
    """The passages were pruned to their sentences closest to the question."""


class PromptAssembler:
    """Builds the prompt for one question; cheap, stateless between calls, thread-safe."""

    def __init__(
        self,
        tokenizer: PromptTokenizer,
        *,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        context_tokens: int = 1024,
        layout: PromptLayout = "shared_prefix_first",
    ) -> None:
        if context_tokens < 0:
            raise ValueError(f"context_tokens must be >= 0, got {context_tokens}")
        self.layout = layout
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.context_tokens = context_tokens
        self._special: re.Pattern[str] | None = None

    def assemble(
        self,
        question: str,
        passages: Sequence[ContextPassage],
        *,
        context_tokens: int | None = None,
        pieces: Sequence[Sequence[ScoredText]] | None = None,
    ) -> AssembledPrompt:
        """The prompt for ``question`` over ``passages`` (best first) within ``context_tokens``;
        pruned to each passage's sentences closest to the question when ``pieces`` (one list
        per passage, its text cut into scored pieces) is given."""
        budget = self.context_tokens if context_tokens is None else context_tokens
        if budget < 0:
            raise ValueError(f"context_tokens must be >= 0, got {budget}")
        if pieces is not None and len(pieces) != len(passages):
            raise ValueError(f"{len(pieces)} lists of pieces for {len(passages)} passages")
        if pieces is None:
            packed = self._pack(passages, budget)
        else:
            packed = self._prune(passages, pieces, budget)
        blocks = [self._block(p.label, p.passage, p.text) + _SEPARATOR for p in packed]
        context = "".join(blocks) if blocks else _NO_PASSAGES + _SEPARATOR
        asked = "Question: " + self.neutralize(question.strip())
        if self.layout == "question_first":  # for comparison only: defeats prefix caching
            user = asked + _SEPARATOR + context.rstrip("\n")
        else:
            user = context + asked
        text = self.tokenizer.render_chat(
            [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": user}]
        )
        token_ids = self.tokenizer.encode(text)
        return AssembledPrompt(
            text=text,
            token_ids=token_ids,
            prompt_tokens=len(token_ids),
            passages=packed,
            dropped=len(passages) - len(packed),
            context_tokens_budget=budget,
            context_tokens_used=sum(p.tokens for p in packed),
            question=question.strip(),
            pruned=pieces is not None,
        )

    def neutralize(self, text: str) -> str:
        """``text`` with no string the tokenizer would parse as a special token: each of its
        special tokens (``<|im_start|>``, ``<file_sep>``, ``</s>``, ``[INST]``...) is broken by a
        space after its first character, and ``<|`` always (``_neutralize``)."""
        pattern = self._special_pattern()
        text = _neutralize(text)
        if pattern is None:
            return text
        for _ in range(4):  # a break may, in theory, complete another token: run to a fixpoint
            broken = pattern.sub(_break, text)
            if broken == text:
                break
            text = broken
        return text

    def _special_pattern(self) -> re.Pattern[str] | None:
        """The tokenizer's special tokens as one pattern, longest first; read on first use (the
        tokenizer of a remote model loads when its backend starts)."""
        if self._special is None:
            tokens = sorted({t for t in self.tokenizer.special_tokens() if len(t) > 1}, key=len)
            if not tokens:
                self._special = _NEVER
            else:
                self._special = re.compile("|".join(re.escape(t) for t in reversed(tokens)))
        return None if self._special is _NEVER else self._special

    def _pack(self, passages: Sequence[ContextPassage], budget: int) -> list[PromptPassage]:
        packed: list[PromptPassage] = []
        used = 0
        for label, passage in enumerate(passages, start=1):
            text = self.neutralize(passage.text.strip())
            tokens = self._tokens(label, passage, text)
            if used + tokens <= budget:
                packed.append(PromptPassage(label, passage, text, tokens, truncated=False))
                used += tokens
                continue
            cut = self._cut(label, passage, text, budget - used)
            if cut is not None:
                packed.append(PromptPassage(label, passage, cut[0], cut[1], truncated=True))
            break
        return packed

    def _prune(
        self,
        passages: Sequence[ContextPassage],
        pieces: Sequence[Sequence[ScoredText]],
        budget: int,
    ) -> list[PromptPassage]:
        texts = [[self.neutralize(p.text) for p in scored] for scored in pieces]
        cost = [[self.tokenizer.count(t) for t in ts] for ts in texts]
        header = [self._tokens(0, passage, "") for passage in passages]
        gap = self.tokenizer.count(_GAP)
        chosen: list[set[int]] = [set() for _ in passages]
        taken: list[tuple[int, set[int]]] = []  # (passage, pieces) in the order added

        def estimate(i: int, picked: set[int]) -> int:
            runs = sum(1 for j in picked if j - 1 not in picked)
            return header[i] + sum(cost[i][j] for j in picked) + gap * max(runs - 1, 0)

        used = 0
        orders = [_preference(scored) for scored in pieces]
        for rank in range(max((len(o) for o in orders), default=0)):
            for i, order in enumerate(orders):
                if rank >= len(order) or order[rank] in chosen[i]:
                    continue
                center = order[rank]
                now = estimate(i, chosen[i]) if chosen[i] else 0
                for unit in (
                    (center - 1, center, center + 1),
                    (center, center + 1),
                    (center,),
                ):
                    add = {j for j in unit if 0 <= j < len(texts[i])} - chosen[i]
                    grown = estimate(i, chosen[i] | add) - now
                    if used + grown <= budget:
                        chosen[i] |= add
                        taken.append((i, add))
                        used += grown
                        break
        while True:  # token counts of pieces add up only nearly: check, and give back the last
            packed = self._pruned_passages(passages, texts, chosen)
            if sum(p.tokens for p in packed) <= budget or not taken:
                return packed
            i, add = taken.pop()
            chosen[i] -= add

    def _pruned_passages(
        self,
        passages: Sequence[ContextPassage],
        texts: Sequence[Sequence[str]],
        chosen: Sequence[set[int]],
    ) -> list[PromptPassage]:
        packed: list[PromptPassage] = []
        for i, passage in enumerate(passages):
            if not chosen[i]:
                continue
            parts: list[str] = []
            for j in sorted(chosen[i]):
                if parts and j - 1 not in chosen[i]:
                    parts.append(_GAP)
                parts.append(texts[i][j] if j + 1 in chosen[i] else texts[i][j].rstrip())
            text = "".join(parts).strip()
            label = len(packed) + 1
            whole = len(chosen[i]) == len(texts[i])
            tokens = self._tokens(label, passage, text)
            packed.append(PromptPassage(label, passage, text, tokens, truncated=not whole))
        return packed

    def _cut(
        self, label: int, passage: ContextPassage, text: str, room: int
    ) -> tuple[str, int] | None:
        """The longest prefix ending at a sentence boundary that fits ``room``, with its tokens."""
        ends = {text[: m.end()].rstrip() for m in _SENTENCE_END.finditer(text)} - {""}
        prefixes = sorted(ends, key=len)
        best: tuple[str, int] | None = None
        lo, hi = 0, len(prefixes) - 1
        while lo <= hi:  # token counts grow with the prefix: binary search
            mid = (lo + hi) // 2
            tokens = self._tokens(label, passage, prefixes[mid])
            if tokens <= room:
                best, lo = (prefixes[mid], tokens), mid + 1
            else:
                hi = mid - 1
        return best

    def _tokens(self, label: int, passage: ContextPassage, text: str) -> int:
        return self.tokenizer.count(self._block(label, passage, text) + _SEPARATOR)

    def _block(self, label: int, passage: ContextPassage, text: str) -> str:
        """``[1] <title> — <section> (<source>)`` on one line, then the text. Of a passage
        that spans sections, the one it starts in: the others' headings are lines of its
        text, and a long header would take the context's tokens."""
        title = self.neutralize(_one_line(passage.title))
        section = self.neutralize(_one_line(passage.section.split(SECTIONS_SEPARATOR, 1)[0]))
        return _block(label, title, section, self.neutralize(_one_line(passage.source)), text)


def _block(label: int, title: str, section: str, source: str, text: str) -> str:
    """``[1] <title> — <section> (<source>)`` on one line, then the text."""
    header = f"[{label}]"
    heading = " — ".join(s for s in (title, section) if s)
    if heading:
        header += " " + heading
    if source:
        header += f" ({source})"
    return f"{header}\n{text}"


def _preference(pieces: Sequence[ScoredText]) -> list[int]:
    """Piece indexes, the highest score first (ties in text order), then the unscored ones in
    text order."""
    scored = sorted(
        (i for i, p in enumerate(pieces) if p.score is not None),
        key=lambda i: (-(pieces[i].score or 0.0), i),
    )
    return scored + [i for i, p in enumerate(pieces) if p.score is None]


def _one_line(value: str) -> str:
    return " ".join(value.split())


def _break(match: re.Match[str]) -> str:
    token = match.group()
    return token[0] + " " + token[1:]


def _neutralize(text: str) -> str:
    """Keep untrusted text from forming chat-control tokens such as ``<|im_start|>``.

    The tokenizer parses special-token strings as special (so the template's own markers work);
    a question or passage must not be able to open a new turn that way.
    """
    return text.replace("<|", "< |")
