"""The embed, search and rerank stages, called directly with test doubles."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from app.stages import (
    EmbedQuestion,
    Found,
    KeywordFound,
    KeywordSearch,
    Rerank,
    SearchIndex,
    StageThreads,
    found_candidates,
)
from retrieval import DocumentStore, Passage, Reranker, UnknownCollection, ingest_path
from retrieval.search.fusion import EXACT_TERM_WEIGHT, KEYWORD_WEIGHT
from tests.fakes.hash_embedder import DIM, CountingEmbedder, HashEmbedder
from tests.fakes.rerankers import OverlapReranker
from tracing.budget import CostModel, DeadlinePassed, StageName
from tracing.budget.cost_model import CPU_STAGE_PRIORS_MS

DOCS = {
    "lists.txt": "Lists\n\nA list holds items in order. Append adds an item to the end of a list.",
    "dicts.txt": "Dictionaries\n\nA dictionary maps keys to values. Look a value up by its key.",
    "loops.txt": "Loops\n\nA for loop runs its body once for each item of a sequence.",
    "lookups.txt": "Lookups\n\nA missing key raises an error; dict.get returns a default.",
}


def later(seconds: float = 5.0) -> float:
    return time.perf_counter() + seconds


@pytest.fixture
def store(tmp_path: Path) -> DocumentStore:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, text in DOCS.items():
        (corpus / name).write_text(text)
    store = DocumentStore(tmp_path / "store")
    store.open()
    report = ingest_path(corpus, collection="docs", embedder=HashEmbedder(), store=store)
    assert report.files == len(DOCS) and not report.failures
    return store


async def test_embed_warms_up_then_gives_the_question_vector() -> None:
    embedder = HashEmbedder()
    stage = EmbedQuestion(embedder, StageThreads("embed", 1, costs=CostModel()))
    await stage.warm_up()
    embedded = await stage.embed_question("How do I append to a list?", deadline=later())
    assert embedder.loaded
    assert embedded.model == "hash-embedder"
    assert embedded.vector.shape == (DIM,)
    assert np.isclose(np.linalg.norm(embedded.vector), 1.0)


async def test_a_question_asked_again_skips_the_model() -> None:
    embedder = CountingEmbedder()
    stage = EmbedQuestion(embedder, StageThreads("embed", 1, costs=CostModel()), cache_size=2)
    first = await stage.embed_question("How do I append to a list?", deadline=later())
    again = await stage.embed_question("  How do I\nappend to a  list? ", deadline=later())
    assert embedder.texts == ["How do I append to a list?"]
    assert (first.cached, again.cached) == (False, True)
    assert np.array_equal(first.vector, again.vector) and not again.vector.flags.writeable
    assert again.attributes()["ragtime.embed.cached"] is True
    await stage.embed_question("What is a dict?", deadline=later())
    await stage.embed_question(
        "What is a loop?", deadline=later()
    )  # the list question leaves the cache
    await stage.embed_question("How do I append to a list?", deadline=later())
    assert embedder.texts.count("How do I append to a list?") == 2
    assert (
        await stage.embed_question("how do i append to a list?", deadline=later())
    ).cached is False


async def test_a_cached_vector_searches_like_a_fresh_one(store: DocumentStore) -> None:
    stage = EmbedQuestion(HashEmbedder(), StageThreads("embed", 1, costs=CostModel()))
    search = SearchIndex(store, StageThreads("search", 1, costs=CostModel()))
    await stage.embed_question("How do I append to a list?", deadline=later())
    cached = await stage.embed_question("How do I append to a list?", deadline=later())
    found = await search.search_vectors("docs", cached.vector, 2, deadline=later())
    assert found.passages[0].source == "lists.txt"


async def test_search_finds_the_nearest_passages_in_their_collection(
    store: DocumentStore,
) -> None:
    stage = SearchIndex(store, StageThreads("search", 1, costs=CostModel()))
    vector = HashEmbedder().embed(["How do I append an item to a list?"])[0]
    found = await stage.search_vectors("docs", vector, 2, deadline=later())
    assert found.passages[0].source == "lists.txt"
    assert len(found.passages) == 2
    assert found.attributes()["ragtime.search.results"] == 2
    assert found.attributes()["ragtime.search.top_score"] == found.passages[0].score


async def test_search_refuses_an_unknown_collection_before_any_work(
    store: DocumentStore,
) -> None:
    stage = SearchIndex(store, StageThreads("search", 1, costs=CostModel()))
    with pytest.raises(UnknownCollection, match="unknown collection 'nope'"):
        stage.check("nope")
    with pytest.raises(UnknownCollection):
        await stage.search_vectors("nope", np.zeros(DIM, dtype=np.float32), 3, deadline=later())


def passages(*texts: str) -> list[Passage]:
    return [
        Passage(i, "docs", f"{i}.txt", "t", "s", text, score=1.0 - i / 10)
        for i, text in enumerate(texts)
    ]


async def test_rerank_reorders_the_candidates_and_keeps_k() -> None:
    reranker = OverlapReranker()
    stage = Rerank(reranker, StageThreads("rerank", 1, costs=CostModel()))
    await stage.warm_up()
    assert stage.status == "loaded: overlap-cross-encoder"
    pool = passages("nothing here", "a dictionary maps keys", "keys map to values in a dict")
    result = await stage.rerank_passages(
        "how do keys map to values", pool, k=2, candidates=3, deadline=later()
    )
    assert [p.id for p in result.passages] == [2, 1]
    assert result.scored == 3 and result.degradation is None
    assert result.attributes() == {
        "ragtime.rerank.model": "overlap-cross-encoder",
        "ragtime.rerank.candidates": 3,
        "ragtime.rerank.planned": 3,
    }


async def test_rerank_with_no_candidates_planned_keeps_the_vector_order() -> None:
    reranker = OverlapReranker()
    stage = Rerank(reranker, StageThreads("rerank", 1, costs=CostModel()))
    await stage.warm_up()
    result = await stage.rerank_passages(
        "q", passages("a", "b", "c"), k=2, candidates=0, deadline=later()
    )
    assert [p.id for p in result.passages] == [0, 1]
    assert result.degradation is None and reranker.cross_encoder.pairs_scored == 0
    assert result.attributes() == {"ragtime.rerank.skipped": True}


async def test_a_configured_cross_encoder_that_did_not_load_is_said_to_be_unavailable() -> None:
    from retrieval import RerankerUnavailable

    stage = Rerank(
        OverlapReranker(load_error="not cached"), StageThreads("rerank", 1, costs=CostModel())
    )
    with pytest.raises(RerankerUnavailable):
        await stage.warm_up()
    result = await stage.rerank_passages(
        "q", passages("a", "b"), k=1, candidates=2, deadline=later()
    )
    assert [p.id for p in result.passages] == [0]
    assert result.degradation == ("rerank_unavailable", "not loaded")


async def test_without_a_configured_cross_encoder_the_found_order_stands_unsaid() -> None:
    """No reranker configured is configuration, not a saving: no degradation."""
    stage = Rerank(Reranker(None), StageThreads("rerank", 1, costs=CostModel()))
    result = await stage.rerank_passages(
        "q", passages("a", "b"), k=1, candidates=2, deadline=later()
    )
    assert [p.id for p in result.passages] == [0] and result.degradation is None


async def test_a_failing_reranker_keeps_the_vector_order_with_its_error() -> None:
    error = RuntimeError("CUDA out of memory")
    stage = Rerank(OverlapReranker(fail_with=error), StageThreads("rerank", 1, costs=CostModel()))
    await stage.warm_up()
    result = await stage.rerank_passages(
        "q", passages("a", "b", "c"), k=2, candidates=3, deadline=later()
    )
    assert [p.id for p in result.passages] == [0, 1]
    assert result.error is not None and result.error.__cause__ is error
    assert result.degradation is not None
    action, reason = result.degradation
    assert action == "rerank_failed" and "CUDA out of memory" in reason


async def test_a_reranker_past_its_time_keeps_the_vector_order() -> None:
    stage = Rerank(OverlapReranker(delay_s=0.5), StageThreads("rerank", 1, costs=CostModel()))
    await stage.warm_up()
    started = time.perf_counter()
    result = await stage.rerank_passages(
        "q", passages("a", "b", "c"), k=2, candidates=3, deadline=later(0.05)
    )
    assert time.perf_counter() - started < 0.4
    assert [p.id for p in result.passages] == [0, 1]
    assert result.degradation is not None and result.degradation[0] == "rerank_timeout"


async def test_a_reranker_short_of_time_scores_the_best_first_and_keeps_the_rest() -> None:
    """Each batch of 2 takes 1 s and the share is 1.9 s: the first batch is scored (the cost
    model's prior, 4 ms a pair, says it fits), the second would end at 2 s or later, past the
    share, and is not begun, however fast the machine. The first has 0.9 s to spare on a slow
    one. The two scored lead, by score; the rest follow in the found order. Once the cost model
    has seen what a pair costs (the budget session teaches it from each rerank; two that agree
    outweigh its prior), the next request, given half a second, begins nothing."""
    reranker = OverlapReranker(delay_s=1.0)
    stage = Rerank(reranker, StageThreads("rerank", 1, costs=CostModel()), batch_size=2)
    await stage.warm_up()
    pool = passages("nothing here", "a dict maps keys", "keys", "maps", "dict keys maps")
    started = time.perf_counter()
    result = await stage.rerank_passages(
        "dict keys maps", pool, k=4, candidates=5, deadline=later(1.9)
    )
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    assert reranker.cross_encoder.pairs_scored == 2 and result.scored == 2
    assert [p.id for p in result.passages] == [1, 0, 2, 3]
    assert result.passages[0].rerank_score == 1.0 and result.passages[2].rerank_score is None
    assert result.degradation is not None
    action, reason = result.degradation
    assert action == "rerank_cut" and reason.startswith("2 of 5 candidates scored")
    assert result.attributes()["ragtime.rerank.planned"] == 5
    assert stage.ms_per_pair == CPU_STAGE_PRIORS_MS[StageName.RERANK]  # nothing taught yet

    for _ in range(2):  # what two such requests' sessions teach
        stage.threads.costs.observe(StageName.RERANK, elapsed_ms, result.scored)
    assert stage.ms_per_pair >= 500.0
    again = await stage.rerank_passages(
        "dict keys maps", pool, k=4, candidates=5, deadline=later(0.5)
    )
    assert reranker.cross_encoder.pairs_scored == 2  # no batch was begun
    assert [p.id for p in again.passages] == [0, 1, 2, 3]
    assert again.degradation is not None and again.degradation[0] == "rerank_timeout"


async def test_a_reranker_with_time_for_every_batch_scores_them_all() -> None:
    reranker = OverlapReranker()
    stage = Rerank(reranker, StageThreads("rerank", 1, costs=CostModel()), batch_size=2)
    await stage.warm_up()
    pool = passages("nothing here", "a dict maps keys", "keys", "maps", "dict keys maps")
    result = await stage.rerank_passages(
        "dict keys maps", pool, k=3, candidates=5, deadline=later()
    )
    assert reranker.cross_encoder.pairs_scored == 5 and result.degradation is None
    assert [p.id for p in result.passages] == [1, 4, 2]  # 1.0, 1.0 (ties keep order), 1/3


async def test_embedding_past_the_deadline_raises() -> None:
    class SlowEmbedder(HashEmbedder):
        def embed(self, texts: Sequence[str]) -> np.ndarray:
            time.sleep(0.3)
            return super().embed(texts)

    stage = EmbedQuestion(SlowEmbedder(), StageThreads("embed", 1, costs=CostModel()))
    with pytest.raises(DeadlinePassed, match="embed"):
        await stage.embed_question("q", deadline=later(0.02))


def test_the_keyword_ranking_weighs_by_mode_and_query() -> None:
    weight = KeywordSearch.weight  # the most it may weigh: whether the side runs at all
    assert weight("What is a list?", "keyword") == 1.0  # alone, it is the ranking
    assert weight("os.path.join", "dense") == 0.0
    assert weight("What is a list?", "hybrid") == 0.0  # a question: its meaning alone
    assert weight("os.path.join", "hybrid") == KEYWORD_WEIGHT  # typed to be found by its words
    long_question = "Why would a list comprehension be faster than a for loop?"
    assert weight(long_question, "hybrid") == 0.0  # no exact term: the side does not run
    named = "Why is dict.get slower than a plain loop over the keys here?"
    assert weight(named, "hybrid") == EXACT_TERM_WEIGHT  # it may weigh, as rare as dict.get is


async def test_the_keyword_search_says_how_much_its_ranking_weighs_here(
    store: DocumentStore,
) -> None:
    """A long question's exact term weighs as rare as it is in the collection searched: the
    search works that out on its own thread, beside the search, never on the event loop (a
    snapshot's index may still have to be loaded or built)."""
    stage = KeywordSearch(store, StageThreads("keyword", 1, costs=CostModel()))
    named = "Why is dict.get slower than a plain loop over the keys here?"
    found = await stage.search_words("docs", named, 3, deadline=later())
    assert found.weight == pytest.approx(
        EXACT_TERM_WEIGHT * store.keyword_rarity("docs", "dict.get")
    )
    assert found.attributes()["ragtime.keyword.weight"] == found.weight
    elsewhere = "Why does my script raise ValueError when it reads a number?"
    assert (await stage.search_words("docs", elsewhere, 3, deadline=later())).weight == 0.0
    typed = await stage.search_words("docs", "os.path.join", 3, deadline=later())
    assert typed.weight == KEYWORD_WEIGHT


def _found(*ids: int) -> list[Passage]:
    return [Passage(i, "docs", f"s{i}", "", "", "text", 0.9 - i / 10) for i in ids]


def test_found_candidates_fuse_in_hybrid_and_mark_each_search() -> None:
    dense = Found("docs", 3, _found(1, 2))
    keyword = KeywordFound("docs", 3, _found(3, 2), weight=KEYWORD_WEIGHT)
    fused = found_candidates("hybrid", dense, keyword, 3)
    assert [p.id for p in fused] == [2, 3, 1]  # the keyword ranking weighs twice the dense
    assert fused[0].found_by == ("dense", "keyword") and fused[1].found_by == ("keyword",)
    alone = found_candidates("hybrid", dense, None, 3)  # the keyword side did not run
    assert [p.id for p in alone] == [1, 2] and alone[0].score == pytest.approx(1 / 61)
    assert all(p.found_by == ("dense",) for p in alone)
    one = found_candidates("keyword", None, keyword, 3)  # its own scores stand
    assert [(p.id, p.found_by) for p in one] == [(3, ("keyword",)), (2, ("keyword",))]
    assert [p.score for p in one] == [p.score for p in keyword.passages]
