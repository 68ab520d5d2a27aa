"""The attribute stage and ``app.stages.citations``, called directly with the hashing embedder
double (the plumbing; what MiniLM attributes is ``tests/bench/test_attribution.py``'s, ``slow``):
words decide first, and the embedder is called only for the sentences they leave open."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import numpy as np
import pytest

from app.stages import Attribute, StageThreads
from app.stages.citations import Attributor, attribute, labels_in, sentences
from tests.fakes.hash_embedder import HashEmbedder
from tracing.budget import CostModel

LISTS = (
    "A list holds items in order. The append method adds an item to the end of a list. "
    "Lists can be sorted in place with their sort method."
)
DICTS = "A dictionary maps keys to values. You look a value up by its key with square brackets."
LOOPS = "A for loop runs its body once for each item of a sequence. The break statement ends it."
PASSAGES = {1: LISTS, 2: DICTS, 3: LOOPS}
THRESHOLD = 0.6
#: Sentences words leave to the embedder (they share some of a passage's words, not enough to
#: decide), each given to the passage whose words it shares by the hashing double.
OPEN = {
    1: "Lists can be sorted in place.",
    2: "A dictionary stores values under keys.",
    3: "The break statement ends a for loop.",
}
#: Words leave it open too; the double finds no passage close enough.
OPEN_UNSUPPORTED = "A list keeps its items in order and append adds one."


def later(seconds: float = 5.0) -> float:
    return time.perf_counter() + seconds


class CountingEmbedder(HashEmbedder):
    """The hashing double counting its calls (each of how many texts)."""

    def __init__(self, *, delay_s: float = 0.0) -> None:
        super().__init__(delay_s=delay_s)
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        return super().embed(texts)


def stage(embedder: HashEmbedder | None = None) -> Attribute:
    embedder = embedder or HashEmbedder()
    embedder.load()
    return Attribute(embedder, StageThreads("attribute", 1, costs=CostModel()), threshold=THRESHOLD)


def test_sentences_split_prose_lists_and_drop_labels_and_scraps() -> None:
    text = "Use append [1] for that. Add one [2]!\n\n- sort orders a list in place\n- Yes.\nOk."
    assert sentences(text) == ["Use append for that.", "- sort orders a list in place"]
    assert labels_in("see [2] and [10], not [x]") == {2, 10}


def test_attribute_gives_each_sentence_its_best_passage_over_the_threshold() -> None:
    answer = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=np.float32)
    passages = {
        1: np.array([[1.0, 0.0]], dtype=np.float32),
        2: np.array([[0.8, 0.6], [0.0, -1.0]], dtype=np.float32),
        3: np.zeros((0, 2), dtype=np.float32),  # a passage without a sentence
    }
    found = attribute(answer, passages, 0.9)
    # Sentence 0 is passage 1's; sentence 1 reaches 0.9 nowhere; sentence 2 is 0.96 to 2's.
    assert [(s.sentence, s.label) for s in found.supports] == [(0, 1), (2, 2)]
    assert found.unsupported == 1
    assert found.by_label() == {1: 1.0, 2: pytest.approx(0.96, abs=1e-4)}


def test_the_attributor_finds_the_supporting_passage_and_leaves_the_rest() -> None:
    embedder = HashEmbedder()
    attributor = Attributor(embedder.embed, model="hash", threshold=THRESHOLD)
    answer = (
        "The append method adds an item to the end of the list. "
        "Paris is sunny in the springtime weather."
    )
    found = attributor(answer, PASSAGES)
    assert found.sentences == 2
    assert [(s.sentence, s.label) for s in found.supports] == [(0, 1)]
    assert found.unsupported == 1


def test_the_attributor_embeds_a_passage_once() -> None:
    embedder = CountingEmbedder()
    calls = embedder.calls
    attributor = Attributor(embedder.embed, model="hash", threshold=THRESHOLD, cache_passages=2)
    attributor(OPEN[2], PASSAGES)
    attributor(OPEN[2], PASSAGES)
    # First call: 1 answer sentence + 7 passage sentences; the second: the answer, and the one
    # passage the 2-passage cache had let go.
    assert calls[0] == 1 + 3 + 2 + 2
    assert calls[1] < calls[0] and attributor.cache_hits == 2


def test_several_answers_are_attributed_with_one_model_call_as_each_alone() -> None:
    embedder = CountingEmbedder()
    answers = [
        OPEN[1],
        "",  # nothing to attribute
        f"{OPEN[2]} Paris is sunny in spring.",  # words decide the second sentence
    ]
    alone = Attributor(HashEmbedder().embed, model="hash", threshold=THRESHOLD)
    expected = [alone(answer, PASSAGES) for answer in answers]
    together = Attributor(embedder.embed, model="hash", threshold=THRESHOLD)
    found = together.attribute_many([(answer, PASSAGES, {}) for answer in answers])
    assert found == expected
    assert [(s.sentence, s.label) for s in found[2].supports] == [(0, 2)]
    assert (found[2].sentences, found[2].by_words) == (2, 1)
    # In one call: each answer's one open sentence and the seven passage sentences it needs.
    assert embedder.calls == [2 * (1 + 3 + 2 + 2)]


def test_a_threshold_outside_the_cosine_range_is_refused() -> None:
    with pytest.raises(ValueError, match="threshold"):
        Attributor(HashEmbedder().embed, model="hash", threshold=1.5)


async def test_the_model_labels_win_and_cost_no_embedding() -> None:
    embedder = HashEmbedder()
    attributed = await stage(embedder).attribute_answer(
        "Append adds an item [1], see also [3] and [9].", PASSAGES, deadline=later()
    )
    assert attributed.method == "model" and attributed.by == "model"
    assert dict(attributed.cited) == {1: None, 3: None}  # [9] labels no passage of the prompt
    assert attributed.grounded is None  # the pipeline judges it, with the question
    question = "What does append do?"
    said = attributed.judged(question, "Append adds an item to the end [1].", PASSAGES.values())
    assert said.grounded is True and said.cited == attributed.cited
    echo = attributed.judged(question, "What does append do? [1]", PASSAGES.values())
    assert echo.grounded is False  # cited by the model, yet it says nothing of the passage
    assert attributed.attributes()["ragtime.attribution.method"] == "model"


async def test_an_answer_without_labels_is_attributed() -> None:
    attributed = await stage().attribute_answer(
        "Lists can be sorted in place with their sort method.", PASSAGES, deadline=later()
    )
    assert attributed.method == "attributed" and attributed.by == "attributed"
    assert list(attributed.cited) == [1]
    assert attributed.unsupported == 0
    answer = "Lists can be sorted in place with their sort method."
    attrs = attributed.judged("How do I sort?", answer, PASSAGES.values()).attributes()
    assert attrs["ragtime.attribution.sentences"] == 1
    assert attrs["ragtime.attribution.grounded"] is True
    assert attrs["ragtime.grounding.new_terms"] == attrs["ragtime.grounding.supported"]


async def test_words_that_decide_every_sentence_leave_the_embedder_alone() -> None:
    """A sentence of a passage's own words is given to it, one that shares none with any
    passage to none: the stage calls no model for either, and says words decided both."""
    embedder = CountingEmbedder()
    answer = "The append method adds an item to the end of a list. Paris is sunny in spring."
    attributed = await stage(embedder).attribute_answer(answer, PASSAGES, deadline=later())
    assert embedder.calls == []
    assert attributed.method == "attributed" and dict(attributed.cited) == {1: 1.0}
    assert (attributed.sentences, attributed.unsupported, attributed.by_words) == (2, 1, 2)
    assert attributed.attributes()["ragtime.attribution.by_words"] == 2
    nothing = await stage(embedder).attribute_answer(
        "The capital of France is Paris, a city on the Seine.", PASSAGES, deadline=later()
    )
    assert nothing.method == "unattributed" and nothing.by_words == 1
    assert embedder.calls == []


async def test_the_embedder_weighs_only_the_sentences_words_leave_open() -> None:
    embedder = CountingEmbedder()
    answer = f"The append method adds an item to the end of a list. {OPEN[3]}"
    attributed = await stage(embedder).attribute_answer(answer, PASSAGES, deadline=later())
    # One call: the open sentence, and the passages' seven sentences (none kept at ingest here).
    assert embedder.calls == [1 + 3 + 2 + 2]
    assert list(attributed.cited) == [1, 3]
    assert (attributed.sentences, attributed.by_words) == (2, 1)
    assert attributed.cited[1] == 1.0  # the share of its words: all
    assert attributed.cited[3] == pytest.approx(0.866, abs=1e-3)  # the double's similarity


async def test_answers_waiting_for_the_stage_are_attributed_in_one_batch() -> None:
    """Four answers at once on a stage of one thread: the first takes the thread, and the
    three that wait for it are attributed together, each as it would be alone."""
    answers = [OPEN[1], OPEN[2], OPEN[3], OPEN_UNSUPPORTED]
    embedder = CountingEmbedder(delay_s=0.05)
    batched = stage(embedder)
    found = await asyncio.gather(
        *(batched.attribute_answer(answer, PASSAGES, deadline=later()) for answer in answers)
    )
    alone = [
        await stage().attribute_answer(answer, PASSAGES, deadline=later()) for answer in answers
    ]
    assert found == alone
    assert [list(a.cited) for a in found] == [[1], [2], [3], []]
    assert len(embedder.calls) == 2  # the first answer, then the three that waited


async def test_an_answer_no_passage_supports_is_not_grounded() -> None:
    attributed = await stage().attribute_answer(
        "The capital of France is Paris, a city on the Seine.", PASSAGES, deadline=later()
    )
    assert attributed.method == "unattributed"  # attribution ran; nothing was attributed
    assert not attributed.cited and attributed.unsupported == 1
    answer = "The capital of France is Paris, a city on the Seine."
    assert attributed.judged("Where is Paris?", answer, PASSAGES.values()).grounded is False


async def test_an_empty_answer_cites_nothing() -> None:
    attributed = await stage().attribute_answer("  ", PASSAGES, deadline=later())
    assert attributed.method == "empty" and attributed.grounded is False and attributed.by is None


async def test_attribution_past_the_deadline_is_skipped_and_says_so() -> None:
    attributed = await stage(HashEmbedder(delay_s=0.3)).attribute_answer(
        "Lists can be sorted in place.", PASSAGES, deadline=later(0.05)
    )
    assert attributed.method == "skipped" and attributed.grounded is None
    assert attributed.degradation is not None
    assert attributed.degradation[0] == "attribution_timeout"
    assert "ragtime.attribution.grounded" not in attributed.attributes()


class BrokenEmbedder(HashEmbedder):
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise RuntimeError("embedder fell over")


async def test_an_embedder_that_fails_leaves_the_citations_unattributed() -> None:
    attributed = await stage(BrokenEmbedder()).attribute_answer(
        "Lists can be sorted in place.", PASSAGES, deadline=later()
    )
    assert attributed.method == "skipped" and attributed.degradation is not None
    action, reason = attributed.degradation
    assert action == "attribution_failed" and "embedder fell over" in reason
