"""Each chunk's sentence vectors, kept in its snapshot at ingest (issue 22 §2): written with the
chunks, carried over by an incremental ingest, read back per chunk, absent from older snapshots;
and attribution that uses them embeds only the answer."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from app.stages import Attribute, StageThreads
from app.stages.attribution import kept_rows
from retrieval import DocumentStore, ingest_path
from retrieval.store.layout import SENTENCE_OFFSETS, SENTENCE_VECTORS
from retrieval.store.sentences import scored_pieces, sentences
from retrieval.store.snapshot import Snapshot
from tests.fakes.hash_embedder import CountingEmbedder, HashEmbedder
from tracing.budget import CostModel

LISTS = "# Lists\n\nA list holds items in order. The append method adds an item to its end.\n"
DICTS = "# Dicts\n\nA dictionary maps keys to values. Look a value up by its key.\n"


def write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def rows_by_source(store: DocumentStore, collection: str) -> dict[str, np.ndarray]:
    snapshot = store.snapshot(collection)
    assert snapshot is not None
    out = {}
    for passage in store.get([int(i) for i in snapshot.ids]):
        rows = snapshot.sentence_rows(passage.id)
        assert rows is not None
        out[passage.source] = rows
    return out


def test_ingest_keeps_each_chunks_sentence_vectors(store: DocumentStore, tmp_path: Path) -> None:
    docs = write(tmp_path / "docs", {"lists.md": LISTS, "dicts.md": DICTS})
    ingest_path(docs, collection="c", embedder=HashEmbedder(), store=store)
    snapshot = store.snapshot("c")
    assert snapshot is not None and snapshot.sentences is not None
    for passage in store.get([int(i) for i in snapshot.ids]):
        rows = snapshot.sentence_rows(passage.id)
        expected = HashEmbedder().embed(sentences(passage.text))
        assert rows is not None and rows.shape == expected.shape == (2, expected.shape[1])
        np.testing.assert_allclose(rows, expected, atol=2e-3)  # kept as float16
        assert store.sentence_rows("c", passage.id) is not None
    assert snapshot.sentence_rows(10_000) is None  # a chunk it does not hold


def test_an_incremental_ingest_carries_the_kept_vectors_over(
    store: DocumentStore, tmp_path: Path
) -> None:
    docs = write(tmp_path / "docs", {"lists.md": LISTS, "dicts.md": DICTS})
    ingest_path(docs, collection="c", embedder=HashEmbedder(), store=store)
    before = rows_by_source(store, "c")
    write(docs, {"sets.md": "# Sets\n\nA set holds unique items. It has no order at all.\n"})
    embedder = CountingEmbedder()
    ingest_path(docs, collection="c", embedder=embedder, store=store)
    after = rows_by_source(store, "c")
    assert sorted(after) == ["dicts.md", "lists.md", "sets.md"]
    np.testing.assert_array_equal(after["lists.md"], before["lists.md"])
    np.testing.assert_array_equal(after["dicts.md"], before["dicts.md"])
    assert not any("list" in text.lower() for text in embedder.texts)  # not embedded again
    assert after["sets.md"].shape[0] == 2


def test_a_snapshot_without_them_still_loads(store: DocumentStore, tmp_path: Path) -> None:
    """Snapshots written before the vectors were kept: nothing to use, attribution embeds."""
    docs = write(tmp_path / "docs", {"lists.md": LISTS})
    ingest_path(docs, collection="c", embedder=HashEmbedder(), store=store)
    snapshot = store.snapshot("c")
    assert snapshot is not None
    (snapshot.path / SENTENCE_VECTORS).unlink()
    (snapshot.path / SENTENCE_OFFSETS).unlink()
    older = Snapshot.load(snapshot.path, verify=False)  # nor did they keep checksums
    assert older.sentences is None
    assert older.sentence_rows(int(older.ids[0])) is None


async def test_attribution_with_kept_vectors_embeds_only_the_answer(
    store: DocumentStore, tmp_path: Path
) -> None:
    docs = write(tmp_path / "docs", {"lists.md": LISTS, "dicts.md": DICTS})
    ingest_path(docs, collection="c", embedder=HashEmbedder(), store=store)
    passages = {p.source: p for p in store.get(list(range(1, 10)))}
    embedder = CountingEmbedder()
    stage = Attribute(
        embedder,
        StageThreads("attribute", 1, costs=CostModel()),
        threshold=0.6,
        stored_rows=store.sentence_rows,
    )
    by_label = {1: passages["lists.md"], 2: passages["dicts.md"]}
    answer = "Append adds an item."  # too few words for words to decide: the embedder does
    found = await stage.attribute_answer(
        answer,
        {label: p.text for label, p in by_label.items()},
        deadline=time.perf_counter() + 10.0,
        chunks={label: (p.collection, p.id, p.text) for label, p in by_label.items()},
    )
    assert found.method == "attributed" and set(found.cited) == {1}
    assert embedder.texts == [answer]  # the passages' sentences came from the snapshot


def test_a_passage_cut_short_is_attributed_on_the_sentences_the_prompt_shows() -> None:
    text = "First sentence of the chunk here. Second sentence of the chunk here."
    rows = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert kept_rows(text, text, rows) is rows
    shown = kept_rows("First sentence of the chunk here. Second sen", text, rows)
    assert shown is not None and shown.tolist() == [[0.0, 1.0, 2.0]]
    assert kept_rows(text, text, None) is None
    assert kept_rows(text, text, rows[:1]) is None  # not this text's sentences: embed instead


def test_scored_pieces_keep_every_character_and_score_each_sentence_by_its_row() -> None:
    text = "Lists hold items. Yes.\n\n- append adds one item\n- pop removes the last one"
    said = sentences(text)
    rows = np.eye(len(said), 4, dtype=np.float32)
    query = np.array([0.0, 0.0, 1.0, 0.0], dtype=np.float32)
    pieces = scored_pieces(text, rows, query)
    assert "".join(p.text for p in pieces) == text
    assert [p.score for p in pieces] == [0.0, None, 0.0, 1.0]  # "Yes." is too short to weigh
    assert pieces[3].text.startswith("- pop removes")


def test_pieces_are_unscored_without_rows_that_match_the_sentences() -> None:
    text = "Lists hold items. Dicts map keys to values."
    query = np.ones(4, dtype=np.float32) / 2
    assert [p.score for p in scored_pieces(text, None, query)] == [None, None]
    wrong = np.eye(3, 4, dtype=np.float32)  # three rows for two sentences
    assert [p.score for p in scored_pieces(text, wrong, query)] == [None, None]


def test_the_stored_sentence_closest_to_the_question_is_the_one_pruning_keeps(
    store: DocumentStore, tmp_path: Path
) -> None:
    """Kept vectors of a real ingest score a passage's sentences against a question's vector."""
    embedder = HashEmbedder()
    ingest_path(
        write(tmp_path / "docs", {"lists.md": LISTS}),
        collection="c",
        embedder=embedder,
        store=store,
    )
    snapshot = store.snapshot("c")
    assert snapshot is not None
    (passage,) = store.get([int(i) for i in snapshot.ids])
    rows = store.sentence_rows("c", passage.id)
    question = embedder.embed(["The append method adds an item to its end."])[0]
    pieces = scored_pieces(passage.text, rows, question)
    best = max((p for p in pieces if p.score is not None), key=lambda p: p.score or 0.0)
    assert best.text.strip() == "The append method adds an item to its end."


def test_a_question_in_a_passage_is_not_scored() -> None:
    """An FAQ chunk holds the next question's heading: close to a question, no answer to it."""
    text = "Use None as the default. How do I pass keyword arguments on? Collect them with **kw."
    rows = np.eye(3, 4, dtype=np.float32)
    query = np.array([0.0, 1.0, 0.0, 0.0], dtype=np.float32)
    pieces = scored_pieces(text, rows, query)
    assert [p.score for p in pieces] == [0.0, None, 0.0]
