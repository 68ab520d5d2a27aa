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
from retrieval.rerank.heldout import EarlyStop, rank_figures
from retrieval.rerank.mining import (
    MinedQuery,
    MinedSet,
    TrainOptions,
    collection_passages,
    mine_queries,
    split_holdout,
)
from retrieval.rerank.trained import RECORD_NAME, choose_reranker
from retrieval.rerank.training import train_reranker
from retrieval.search.fusion import fuse_passages, keyword_weight
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
    _fill(store, hash_embedder, "notes", SECTIONS)
    yield store
    store.close()


#: A second collection, mined only for more pairs: its question headings are queries there.
DEBIAN_SECTIONS = [
    ("debian/basic-defs.html", "1.1. What is Debian GNU/Linux?", [
        "Debian GNU/Linux is a particular distribution of the Linux operating system, and "
        "numerous packages that run on it. In principle users could get the Linux kernel and "
        "all of those programs from the Internet or elsewhere and compile them themselves."]),
    ("debian/pkgtools.html", "8.1. What programs does Debian provide for managing packages?", [
        "There are multiple tools that are used to manage Debian packages, from graphic or "
        "text-based interfaces to the low level tools used to install packages. All the "
        "available tools rely on the lower level tools to properly work and are presented here."]),
]  # fmt: skip


def _fill(store: DocumentStore, embedder: HashEmbedder, collection: str, sections) -> None:  # type: ignore[no-untyped-def]
    by_source: dict[str, list[Chunk]] = {}
    for source, section, texts in sections:
        chunks = by_source.setdefault(source, [])
        for text in texts:
            chunks.append(Chunk(source, source, section, len(chunks), text))
    for source, chunks in by_source.items():
        vectors = embedder.embed([c.text for c in chunks])
        store.replace_source(collection, source, chunks, vectors)


def _mine(  # type: ignore[no-untyped-def]
    store: DocumentStore,
    embedder: HashEmbedder,
    exclude: list[str] | None = None,
    *,
    fused: bool = False,
    collection: str = "notes",
    allow_question_headings: bool = False,
):
    passages = collection_passages(store, embedder, collection)
    return passages, mine_queries(
        passages,
        embedder=embedder,
        search=lambda vector, k: store.search(collection, vector, k),
        keyword_search=(lambda text, k: store.keyword_search(collection, text, k)[0])
        if fused
        else None,
        exclude_questions=exclude or [],
        allow_question_headings=allow_question_headings,
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


def test_fused_candidates_are_hybrid_searchs_ranking(
    tiny_store: DocumentStore, hash_embedder: HashEmbedder
) -> None:
    _, dense = _mine(tiny_store, hash_embedder)
    _, fused = _mine(tiny_store, hash_embedder, fused=True)
    assert [q.text for q in fused.queries] == [q.text for q in dense.queries]
    changed = 0
    for query in fused.queries:
        vector = hash_embedder.embed([query.text])[0]
        expected = fuse_passages(
            tiny_store.search("notes", vector, 20),
            tiny_store.keyword_search("notes", query.text, 20)[0],
            20,
            keyword_weight=keyword_weight(query.text),
        )
        assert [p.id for p in fused.candidates[query.text]] == [p.id for p in expected]
        changed += [p.id for p in expected] != [p.id for p in dense.candidates[query.text]]
    # Short headings weigh the keyword ranking in: their order is not FAISS's alone.
    assert changed >= 1


def test_another_collections_question_headings_are_queries(
    tiny_store: DocumentStore, hash_embedder: HashEmbedder
) -> None:
    _fill(tiny_store, hash_embedder, "debian", DEBIAN_SECTIONS)
    _, mined = _mine(tiny_store, hash_embedder, collection="debian", allow_question_headings=True)
    headings = {q.text for q in mined.queries if q.kind == "heading"}
    assert headings == {
        "What is Debian GNU/Linux?",
        "What programs does Debian provide for managing packages?",
    }
    assert mined.question_headings == 0
    # The evaluation's questions still keep their neighbours out.
    _, kept = _mine(
        tiny_store,
        hash_embedder,
        ["What is Debian GNU/Linux?"],
        collection="debian",
        allow_question_headings=True,
    )
    assert "What is Debian GNU/Linux?" not in {q.text for q in kept.queries}


def test_merged_sets_keep_each_query_once() -> None:
    a = MinedQuery("stack", "heading", "a.md", "s", 1, "text")
    b = MinedQuery("loop", "heading", "b.md", "t", 2, "text")
    hit = Passage(9, "c", "x", "x", "u", "other", 0.1)
    first = MinedSet([a], {"stack": [hit]}, excluded_questions=1, question_headings=2)
    second = MinedSet([a, b], {"stack": [], "loop": [hit]}, excluded_questions=3)
    merged = first.merged(second)
    assert [q.text for q in merged.queries] == ["stack", "loop"]
    assert merged.candidates == {"stack": [hit], "loop": [hit]}
    assert (merged.excluded_questions, merged.question_headings) == (4, 2)


class _Scored:
    """A model the early stop can check: one weight, and the scores its checks return."""

    def __init__(self, scores: list[float]) -> None:
        import torch

        self.model = torch.nn.Linear(1, 1)
        self.scores = scores
        self.modes: list[str] = []

    def eval(self) -> None:
        self.modes.append("eval")

    def train(self) -> None:
        self.modes.append("train")

    def score(self) -> dict[str, dict[str, float]]:
        import torch

        with torch.no_grad():  # what the weight was when this check ran
            self.model.weight.fill_(float(len(self.scores)))
        return {"reranked": {"ndcg10": self.scores.pop(0)}, "vector": {"ndcg10": 0.6}}


def test_early_stop_keeps_the_best_checked_weights_and_stops_after_patience() -> None:
    model = _Scored([0.30, 0.50, 0.45, 0.48, 0.20, 0.90])
    early = EarlyStop(model, model.score, every=10, patience=3)
    lines: list[str] = []
    stopped_at = next(step for step in range(1, 61) if early.after(step, lines.append))
    # Checked at 10, 20, 30, 40, 50; the best (0.50) at 20, then three misses: stop at 50, so
    # the 0.90 a longer run would have reached is never seen.
    assert stopped_at == 50
    assert early.checks.curve == [(10, 0.30), (20, 0.50), (30, 0.45), (40, 0.48), (50, 0.20)]
    assert (early.checks.best_step, early.checks.best_ndcg10) == (20, 0.50)
    assert early.checks.search_ndcg10 == 0.6 and "search order 0.6000" in lines[0]
    assert early.checks.stopped_early and model.modes[:2] == ["eval", "train"]
    early.restore_best(lines.append)
    # The weights of step 20's check: five scores were left when it ran.
    assert model.model.weight.detach().item() == 5.0
    assert lines[-1] == "kept the weights of step 20"


def test_early_stop_off_never_checks() -> None:
    model = _Scored([])
    early = EarlyStop(model, model.score, every=0, patience=1)
    assert not any(early.after(step, print) for step in range(1, 30))
    assert early.checks.curve == [] and model.modes == []


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
    ("field", "value"),
    [
        ("holdout", 0.0),
        ("max_length", 8),
        ("negatives", 0),
        ("max_steps", 0),
        ("eval_every", -1),
        ("patience", 0),
    ],
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


@pytest.mark.slow
def test_training_with_another_collection_and_early_stopping_records_both(
    tiny_store: DocumentStore,
    hash_embedder: HashEmbedder,
    tiny_cross_encoder_path: Path,
    tmp_path: Path,
) -> None:
    _fill(tiny_store, hash_embedder, "debian", DEBIAN_SECTIONS)
    options = TrainOptions(
        max_steps=6, epochs=6, batch_queries=2, holdout=0.5, max_length=64, eval_every=1, patience=2
    )
    lines: list[str] = []
    target, report = train_reranker(
        tiny_store,
        hash_embedder,
        "notes",
        base_model=str(tiny_cross_encoder_path),
        models_dir=tmp_path / "models",
        also_collections=["debian"],
        options=options,
        progress=lines.append,
    )
    record = json.loads((target / RECORD_NAME).read_text())
    # The Debian questions (two headings, one first sentence) are training queries, never held
    # out; the held-out split is notes' own, half of it checked as training goes.
    assert record["mined"]["also_collections"] == {"debian": 3}
    assert record["mined"]["validation_queries"] >= 1 and record["heldout"]["queries"] >= 1
    validation = record["heldout"]["validation"]
    steps = [step for step, _ in validation["curve"]]
    assert steps == list(range(1, report.steps + 1)) and validation["best_step"] in steps
    assert validation["best_ndcg10"] == max(ndcg for _, ndcg in validation["curve"])
    assert 0.0 <= validation["search_ndcg10"] <= 1.0
    if validation["stopped_early"]:
        assert report.steps < 6
    assert f"kept the weights of step {validation['best_step']}" in lines
