"""The attribute stage: which passages the final answer cites, and how that was found.

The model's own ``[n]`` labels win: an answer that carries the label of a passage the prompt
held cites what it labels (``by = "model"``), and costs nothing more. An answer that carries
none has its sentences attributed to the passages that support them (``app.stages.citations``):
words first, in the stage itself (``app.stages.lexical``: a few set operations), and when they
decide every sentence no model is called and no thread is waited for. Otherwise the sentences
words leave open go to the question embedder, on the stage's own thread, waited for no later
than the deadline. The answers of requests that wait for that thread together are attributed in
one batch, with one model call for all their sentences (``MicroBatcher``): under load the
model's cost per sentence falls, where it is most of a request's own work. An attribution that
runs past the deadline, or that the pipeline skips for want of time, leaves the answer's
citations unattributed, and says so (``method = "skipped"``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from app.stages.batching import MicroBatcher
from app.stages.citations import Ask, Attribution, Attributor, Worded, labels_in, sentences
from app.stages.grounding import Grounding, judge
from app.stages.result import StageResult
from app.stages.threads import StageThreads
from inference.prompt import PromptPassage
from retrieval import Embedder, Embedders
from tracing.budget import Allowance, DeadlinePassed, StageName

#: A chunk's kept sentence vectors, by collection and chunk id (None: none kept).
StoredRows = Callable[[str, int], np.ndarray | None]
#: A prompt passage's stored chunk: collection, chunk id and its whole text.
KeptChunk = tuple[str, int, str]

#: Stored chunks whose sentences stay split (a few MB): the same passages recur across questions,
#: and splitting a prompt's five was a sixth of attribution's CPU beside the answer's embedding.
SPLIT_CHUNKS = 1024

#: Answers attributed in one batch at most: a few sentences each, so that a batch's texts stay
#: small enough for the embedder's one-thread session.
ATTRIBUTE_BATCH = 8
#: One request's attribution asked: its answer's sentences as words left them, its passages'
#: prompt texts by label, and which stored chunk each label is.
Asked = tuple[Worded, Mapping[int, str], Mapping[int, KeptChunk]]

#: How an answer's citations were found: the model's own labels, attribution (``unattributed``
#: when it ran and no passage supports any sentence), the labels of an extractive answer's
#: sentences, neither for want of time, or none to find (an empty answer, an abstention).
Method = Literal[
    "model", "attributed", "extracted", "unattributed", "skipped", "empty", "abstained"
]
#: Who wrote an answer: the model, the passages' own sentences, or the abstention.
Writer = Literal["generate", "extract", "abstain"]


@dataclass(frozen=True)
class Attributed(StageResult):
    """The answer's citations: each cited label with its support (the best score of an answer
    sentence given to it, a share of words or a cosine similarity: ``app.stages.citations``;
    None for the model's own labels), and how they were found."""

    method: Method
    cited: Mapping[int, float | None] = field(default_factory=dict)
    sentences: int = 0
    """Answer sentences weighed (attribution only)."""
    unsupported: int = 0
    """Of those, the ones no passage supports."""
    by_words: int = 0
    """Of those, the ones words decided (``app.stages.lexical``); the embedder decided the
    others."""
    degradation: tuple[str, str] | None = None
    """``(action, reason)`` when attribution was skipped or cut short."""
    grounding: Grounding | None = None
    """What the answer adds to its question, and how much of it the passages hold
    (``app.stages.grounding``); None when not judged."""

    @property
    def units(self) -> float:
        """What its cost is learned over: one attribution run (the model's own labels, or a
        skip, teach nothing of its cost)."""
        return 1.0 if self.method in ("attributed", "unattributed") else 0.0

    @property
    def by(self) -> Literal["model", "attributed", "extracted"] | None:
        if self.method in ("model", "attributed", "extracted"):
            return self.method
        return None

    @property
    def grounded(self) -> bool | None:
        """Whether the passages bear out what the answer says beyond its question
        (``app.stages.grounding``); None when that was not judged. Never true for an answer
        with nothing to bear out (empty, an abstention) or one attribution found no passage
        supporting any sentence of: the signals agree."""
        if self.method in ("empty", "abstained", "unattributed"):
            return False
        return None if self.grounding is None else self.grounding.grounded

    def judged(self, question: str, answer: str, passages: Iterable[str]) -> Attributed:
        """This result with the answer's grounding judged."""
        return replace(self, grounding=judge(question, answer, passages))

    @classmethod
    def skipped(cls, action: str, reason: str) -> Attributed:
        return cls("skipped", degradation=(action, reason))

    def attributes(self) -> dict[str, str | int | bool]:
        attrs: dict[str, str | int | bool] = {
            "ragtime.attribution.method": self.method,
            "ragtime.attribution.cited": len(self.cited),
        }
        if self.method in ("attributed", "unattributed"):
            attrs["ragtime.attribution.sentences"] = self.sentences
            attrs["ragtime.attribution.unsupported"] = self.unsupported
            attrs["ragtime.attribution.by_words"] = self.by_words
        if self.grounded is not None:
            attrs["ragtime.attribution.grounded"] = self.grounded
        if self.grounding is not None:
            attrs["ragtime.grounding.new_terms"] = self.grounding.new_terms
            attrs["ragtime.grounding.supported"] = self.grounding.supported
        return attrs


@dataclass(frozen=True)
class Answered:
    """A final (moderated) answer to attribute: its question, its text, the prompt's passages."""

    question: str
    text: str
    passages: Sequence[PromptPassage]
    written_by: Writer = "generate"


class Attribute:
    """Finds the passages an answer cites: its labels, else attribution by similarity."""

    name = StageName.ATTRIBUTE
    component = "embedder"

    def __init__(
        self,
        embedder: Embedder | Embedders,
        threads: StageThreads,
        *,
        threshold: float,
        stored_rows: StoredRows = lambda collection, chunk_id: None,
        embedder_for: Callable[[str], Embedder] | None = None,
    ) -> None:
        self.embedders = embedder if isinstance(embedder, Embedders) else Embedders(embedder)
        self.threads = threads
        self.threshold = threshold
        self.stored_rows = stored_rows
        """A chunk's sentence vectors, as ingest kept them (``DocumentStore.sentence_rows``)."""
        self.embedder_for = embedder_for or (lambda collection: self.embedders.default)
        """A collection's embedder: its kept sentence vectors are of that embedder's backend."""
        self._attributors: dict[str, Attributor] = {}
        self._batcher = MicroBatcher(self._attribute_many, threads, max_batch=ATTRIBUTE_BATCH)

    def _attributor(self, embedder: Embedder) -> Attributor:
        found = self._attributors.get(embedder.backend)
        if found is None:
            found = Attributor(embedder.embed, model=embedder.model_name, threshold=self.threshold)
            self._attributors[embedder.backend] = found
        return found

    async def warm_up(self) -> None:
        """The question embedder, which the embed stage loads too (a second call is free)."""
        await asyncio.to_thread(self.embedders.default.load)

    @staticmethod
    def by_model(answer: str, labels: set[int]) -> Attributed | None:
        """The model's citations, when ``answer`` labels a passage of ``labels``; else None."""
        if not answer.strip():
            return Attributed("empty")
        cited = labels_in(answer) & labels
        if not cited:
            return None
        return Attributed("model", dict.fromkeys(sorted(cited)))

    @classmethod
    def by_writer(cls, writer: Writer, answer: str, labels: set[int]) -> Attributed | None:
        """The citations an answer carries by who wrote it: an extractive answer's labels, none
        for an abstention, the model's own labels when it wrote some; else None."""
        if writer == "abstain":
            return Attributed("abstained")
        if writer == "extract" and answer.strip():
            return Attributed("extracted", dict.fromkeys(sorted(labels_in(answer) & labels)))
        return cls.by_model(answer, labels)

    async def run(self, answered: Answered, allowance: Allowance) -> Attributed:
        """The final answer's citations, the model's labels or else attribution when there is
        time left for it (else skipped, as a degradation), and its grounding judged (a few set
        operations, in the stage, so that its span records them)."""
        text, shown = answered.text, answered.passages
        passages = {p.label: p.text for p in shown}
        found = self.by_writer(answered.written_by, text, set(passages))
        if found is None:
            room = allowance.room()
            if room.fits:
                found = await self.attribute_answer(
                    text, passages, deadline=room.deadline, chunks=kept_chunks(shown)
                )
            else:
                reason = f"{room.reason}: citations not attributed"
                found = Attributed.skipped("attribution_skipped", reason)
        if answered.written_by == "extract":  # it quotes whole passages, not only the prompt's
            return found.judged(answered.question, text, [p.passage.text for p in shown])
        return found.judged(answered.question, text, passages.values())

    async def attribute_answer(
        self,
        answer: str,
        passages: Mapping[int, str],
        *,
        deadline: float,
        chunks: Mapping[int, KeptChunk] | None = None,
    ) -> Attributed:
        """The citations of ``answer`` among ``passages`` (their prompt texts, by label);
        ``chunks`` says which stored chunk (collection, id, its whole text) each label is, so
        that the sentence vectors ingest kept are used instead of embedding it again. Words
        decide first, here: the thread and the model only when they leave a sentence open."""
        own = self.by_model(answer, set(passages))
        if own is not None:
            return own
        worded = Worded.of(answer, passages)
        if not worded.open:
            return attributed(worded.attribution())
        try:
            batched = await self._batcher.submit(
                (worded, passages, chunks or {}), deadline=deadline
            )
            found: Attribution = batched.value
        except DeadlinePassed as exc:
            return Attributed.skipped("attribution_timeout", f"ran past the deadline: {exc}")
        except Exception as exc:  # an embedder that fails leaves the citations unattributed
            reason = f"attribution failed ({type(exc).__name__}: {exc})"
            return Attributed.skipped("attribution_failed", reason)
        return attributed(found)

    def _attribute_many(self, asked: list[Asked]) -> list[Attribution]:
        """On the stage's thread: each request's attribution, those of one embedder with one
        model call."""
        by_attributor: dict[Attributor, tuple[list[int], list[Ask]]] = {}
        for index, ask in enumerate(asked):
            attributor, one = self._prepared(*ask)
            indices, asks = by_attributor.setdefault(attributor, ([], []))
            indices.append(index)
            asks.append(one)
        found: dict[int, Attribution] = {}
        for attributor, (indices, asks) in by_attributor.items():
            found.update(zip(indices, attributor.attribute_many(asks), strict=True))
        return [found[index] for index in range(len(asked))]

    def _prepared(
        self, answer: Worded, passages: Mapping[int, str], chunks: Mapping[int, KeptChunk]
    ) -> tuple[Attributor, Ask]:
        """The attributor of one request's attribution, and what it is asked: its passages'
        kept sentence vectors where they have them."""
        collections = {collection for collection, _, _ in chunks.values()}
        if len(collections) != 1:  # none kept, or several collections' (maybe several backends)
            return self._attributor(self.embedders.default), (answer, passages, {})
        embedder = self.embedder_for(collections.pop())  # the one whose vectors ingest kept
        embedder.load()  # at once when loaded
        stored = {}
        for label, (collection, chunk_id, text) in chunks.items():
            if label in passages:
                rows = kept_rows(passages[label], text, self.stored_rows(collection, chunk_id))
                if rows is not None:
                    stored[label] = rows
        return self._attributor(embedder), (answer, passages, stored)


def attributed(found: Attribution) -> Attributed:
    """The stage's result for an attribution that ran: the passages it cites, if any."""
    cited = dict(sorted(found.by_label().items()))
    return Attributed(
        "attributed" if cited else "unattributed",
        cited,
        sentences=found.sentences,
        unsupported=found.unsupported,
        by_words=found.by_words,
    )


def kept_rows(prompt_text: str, text: str, rows: np.ndarray | None) -> np.ndarray | None:
    """Of a chunk's kept sentence vectors (``rows``, one per sentence of its stored ``text``),
    those of the sentences the prompt holds (``prompt_text``: a passage cut short to fit the
    prompt is attributed on what the model was shown). None when none were kept, or when they
    do not match the text's sentences (then the passage is embedded)."""
    if rows is None:
        return None
    said = stored_sentences(text)
    if len(said) != len(rows):
        return None
    if prompt_text == text:
        return rows
    shown = " ".join(prompt_text.split())
    return rows[[i for i, sentence in enumerate(said) if sentence in shown]]


@functools.lru_cache(maxsize=SPLIT_CHUNKS)
def stored_sentences(text: str) -> tuple[str, ...]:
    """``sentences(text)`` of a stored chunk, split once while it recurs."""
    return tuple(sentences(text))


def stored_chunk(passage: object) -> tuple[str, int] | None:
    """The collection and chunk id of a passage that came from a collection, else None."""
    chunk_id = getattr(passage, "id", None)
    collection = getattr(passage, "collection", None)
    if isinstance(chunk_id, int) and isinstance(collection, str):
        return collection, chunk_id
    return None


def kept_chunks(passages: Iterable[PromptPassage]) -> dict[int, KeptChunk]:
    """Each prompt passage's stored chunk, by label (passages not from a collection left out)."""
    out: dict[int, KeptChunk] = {}
    for p in passages:
        found = stored_chunk(p.passage)
        if found is not None:
            out[p.label] = (*found, p.passage.text)
    return out
