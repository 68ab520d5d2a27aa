"""Mining training pairs from a collection, the held-out figures, and a short real training run.

The mining tests use ``HashEmbedder`` (no model): they check which queries, positives and hard
negatives are mined and what is left out, not how good MiniLM's neighbours are.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrieval import Chunk, DocumentStore, Passage, Reranker, UnknownCollection
from retrieval.reranker_mining import (
    MinedQuery,
    TrainOptions,
    collection_passages,
    mine_queries,
    split_holdout,
)
from retrieval.train_reranker import rank_figures, train_reranker
from retrieval.trained_reranker import RECORD_NAME, choose_reranker
from tests.fakes.hash_embedder import HashEmbedder

STACK_FIRST = "A list can be used as a stack, where the last element added is the first one taken."
STACK_REST = (
    "To add an item to the top of the stack, use append. To take an item from the top of the "
    "stack, use pop without an explicit index, and the list shrinks by one element each time."
)
#: (source, section, chunk texts)
SECTIONS = [
    ("tutorial/lists.md", "5.1.1. Using Lists as Stacks", [f"{STACK_FIRST} {STACK_REST}",
        "Stacks built on lists are fast because append and pop work at the end of the list."]),
    ("tutorial/lists.md", "List Comprehensions", [
        "List comprehensions provide a concise way to create lists from other sequences. Common "
        "applications are to make new lists where each element is the result of some operations "
        "applied to each member of another sequence or iterable, or to create a subsequence."]),
    ("tutorial/loops.md", "for Statements", [
        "The for statement in Python iterates over the items of any sequence in order. It differs "
        "a bit from what you may be used to in C or Pascal, where the user defines both the "
        "iteration step and the halting condition of the loop over the list of numbers."]),
    ("faq/programming.md", "How do I make a stack of items?", [
        "Use a list as a stack of items. Append pushes an item and pop removes the last item "
        "again, so the list works as a last in first out stack for any kind of values."]),
]  # fmt: skip


@pytest.fixture
def hash_embedder() -> HashEmbedder:
    embedder = HashEmbedder()
    embedder.load()
    return embedder


@pytest.fixture
def tiny_store(tmp_path: Path, hash_embedder: HashEmbedder) -> Iterator[DocumentStore]:
    """The hand-made collection ``notes``, embedded with ``HashEmbedder``."""
    store = DocumentStore(tmp_path / "store")
    store.open()
    by_source: dict[str, list[Chunk]] = {}
    for source, section, texts in SECTIONS:
        chunks = by_source.setdefault(source, [])
        for text in texts:
            chunks.append(Chunk(source, source, section, len(chunks), text))
    for source, chunks in by_source.items():
        vectors = hash_embedder.embed([c.text for c in chunks])
        store.replace_source("notes", source, chunks, vectors)
    yield store
    store.close()


def _mine(store: DocumentStore, embedder: HashEmbedder, exclude: list[str] | None = None):  # type: ignore[no-untyped-def]
    passages = collection_passages(store, embedder, "notes")
    return passages, mine_queries(
        passages,
        embedder=embedder,
        search=lambda vector, k: store.search("notes", vector, k),
        exclude_questions=exclude or [],
    )


def test_the_collection_is_read_whole(
    tiny_store: DocumentStore, hash_embedder: HashEmbedder
) -> None:
    passages = collection_passages(tiny_store, hash_embedder, "notes")
    assert len(passages) == 5 and [p.id for p in passages] == sorted(p.id for p in passages)
    with pytest.raises(UnknownCollection, match="'missing'"):
        collection_passages(tiny_store, hash_embedder, "missing")


def test_headings_become_queries_with_their_sections_first_chunk(
    tiny_store: DocumentStore, hash_embedder: HashEmbedder
) -> None:
    passages, mined = _mine(tiny_store, hash_embedder)
    headings = {q.text: q for q in mined.queries if q.kind == "heading"}
    # Numbering is stripped; a one-word heading would be too vague and is not used.
    assert set(headings) == {"Using Lists as Stacks", "List Comprehensions", "for Statements"}
    stacks = headings["Using Lists as Stacks"]
    first = next(p for p in passages if p.section == "5.1.1. Using Lists as Stacks")
    assert stacks.positive_id == first.id and stacks.positive_text == first.text


def test_a_first_sentence_query_is_removed_from_its_positive(
    tiny_store: DocumentStore, hash_embedder: HashEmbedder
) -> None:
    _, mined = _mine(tiny_store, hash_embedder)
    sentence = next(q for q in mined.queries if q.text == STACK_FIRST)
    assert sentence.kind == "sentence" and sentence.removed == STACK_FIRST
    assert STACK_FIRST not in sentence.positive_text
    assert sentence.positive_text.startswith("To add an item")
    # The short second chunk has no first sentence with enough text after it.
    assert not any(q.text.startswith("Stacks built on lists") for q in mined.queries)


def test_hard_negatives_are_neighbours_from_other_sections(
    tiny_store: DocumentStore, hash_embedder: HashEmbedder
) -> None:
    _, mined = _mine(tiny_store, hash_embedder)
    for query in mined.queries:
        negatives = mined.negatives(query, 3)
        assert negatives, query.text
        assert all((n.source, n.section) != query.group for n in negatives)
        hits = mined.candidates[query.text]
        # FAISS order: the negatives are the first other-section hits.
        assert [n.id for n in negatives] == [
            p.id for p in hits if (p.source, p.section) != query.group
        ][:3]
    stacks = next(q for q in mined.queries if q.text == STACK_FIRST)
    # The hardest negative shares the query's words: the FAQ's stack answer.
    assert mined.negatives(stacks, 1)[0].source == "faq/programming.md"


def test_question_headings_are_never_queries(
    tiny_store: DocumentStore, hash_embedder: HashEmbedder
) -> None:
    _, mined = _mine(tiny_store, hash_embedder)
    assert mined.question_headings == 1
    assert not any(q.text.endswith("?") for q in mined.queries)
    assert all(q.kind == "sentence" for q in mined.queries if q.source.startswith("faq/"))


def test_queries_close_to_evaluation_questions_are_left_out(
    tiny_store: DocumentStore, hash_embedder: HashEmbedder
) -> None:
    _, everything = _mine(tiny_store, hash_embedder)
    # One by its embedding (cosine 0.87 here), one by its words.
    exclude = ["Lists as stacks: using them", "list comprehensions?"]
    _, mined = _mine(tiny_store, hash_embedder, exclude)
    texts = {q.text for q in mined.queries}
    assert "Using Lists as Stacks" not in texts and "List Comprehensions" not in texts
    assert "for Statements" in texts
    assert mined.excluded_questions == len(everything.queries) - len(mined.queries) >= 2


def test_holdout_keeps_sections_whole() -> None:
    queries = [
        MinedQuery(f"q{s}{i}", "sentence", "doc.md", f"section {s}", s * 10 + i, "text")
        for s in range(10)
        for i in range(3)
    ]
    train, held = split_holdout(queries, 0.2, seed=1)
    assert len(train) + len(held) == 30 and 6 <= len(held) <= 9
    assert not {q.group for q in train} & {q.group for q in held}
    assert split_holdout(queries, 0.2, seed=1) == (train, held)


def test_rank_figures() -> None:
    # Relevant first and third of two relevant: nDCG = (1 + 1/2) / (1 + 1/log2(3)).
    figures = rank_figures([[True, False, True], [False, False, False]], [2, 1])
    assert figures.ndcg10 == pytest.approx((1.5 / (1 + 1 / 1.58496)) / 2, abs=1e-3)
    assert figures.mrr10 == pytest.approx(0.5)
    assert rank_figures([], []).ndcg10 == 0.0
    # MRR is cut at 10, as the evaluation's is: a first hit at place 11 counts nothing.
    assert rank_figures([[False] * 10 + [True]], [1]).mrr10 == 0.0


@pytest.mark.parametrize(
    ("field", "value"), [("holdout", 0.0), ("max_length", 8), ("negatives", 0), ("max_steps", 0)]
)
def test_options_are_checked(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        TrainOptions(**{field: value})  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_short_training_run_saves_a_model_the_reranker_loads(
    tiny_store: DocumentStore,
    hash_embedder: HashEmbedder,
    tiny_cross_encoder_path: Path,
    tmp_path: Path,
) -> None:
    """Three steps from the tests' tiny BERT (MiniLM's run is in BENCHMARKS.md): plumbing."""
    options = TrainOptions(max_steps=3, epochs=5, batch_queries=2, holdout=0.3, max_length=64)
    target, report = train_reranker(
        tiny_store,
        hash_embedder,
        "notes",
        base_model=str(tiny_cross_encoder_path),
        models_dir=tmp_path / "models",
        options=options,
    )
    assert target == tmp_path / "models" / "reranker-notes"
    assert report.steps == 3 and report.loss_last is not None
    record = json.loads((target / RECORD_NAME).read_text())
    assert record["heldout"]["queries"] >= 1 and "gain_ndcg10" in record["heldout"]
    assert (
        record["options"]["max_steps"] == 3 and record["mined"]["question_headings_left_out"] == 1
    )
    reranker = Reranker(str(target))
    reranker.load()
    passages = [Passage(1, "notes", "a", "a", "s", "a stack of lists", 0.5),
                Passage(2, "notes", "b", "b", "t", "a for loop", 0.4)]  # fmt: skip
    result = reranker.rerank("stack", passages, top_n=2)
    assert result.candidates == 2 and all(p.rerank_score is not None for p in result.passages)
    # The default-selection rule reads the same record.
    gain = record["heldout"]["gain_ndcg10"]
    choice = choose_reranker(None, tmp_path / "models", "notes", min_gain=gain)
    assert choice.model == str(target)
