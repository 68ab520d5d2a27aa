"""Keyword (BM25) search beside the vectors: the index written, checksummed and reopened with
each snapshot, exact identifiers found where dense search misses them, filters, reciprocal rank
fusion, and an old snapshot without the index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval import (
    BrokenIndex,
    Chunk,
    DocumentStore,
    Passage,
    SearchFilter,
    fuse_passages,
    rrf_fuse,
)
from retrieval.eval import Dataset, keyword_dataset, phrase_dataset
from retrieval.search.bm25 import KEYWORD_DIR, tokens
from retrieval.search.fusion import EXACT_TERM_WEIGHT, exact_terms, keyword_weight
from retrieval.store.layout import MANIFEST
from retrieval.store.snapshot import Snapshot
from tests.fakes.hash_embedder import HashEmbedder

#: Two decoys that repeat the words of ``os.path.join``; the chunk that holds the identifier
#: itself is long and about something else, so a bag of words (dense) ranks it last.
TEXTS = {
    "guide/paths.md": "Path join: join a path to a path. Join paths, os path join path.",
    "guide/more.md": "The os module: a path, another path, join them; os path join.",
    "ref/names.rst": (
        "Building file names portably across systems is done with os.path.join, which takes "
        "any number of segments; unrelated prose about encodings, locales, terminals, "
        "archives, compression levels and network sockets follows here."
    ),
    "ref/errors.txt": "A ValueError is raised by int('x'); see --verbose and Python 3.11.",
}


def _store(root: Path) -> DocumentStore:
    embedder = HashEmbedder()
    store = DocumentStore(root)
    store.open()
    with store.writer("docs") as writer:
        for source, text in TEXTS.items():
            chunks = [Chunk(source, "Doc", "", 0, text)]
            writer.replace_source(source, chunks, embedder.embed([text]))
    return store


def _sources(passages: list[Passage]) -> list[str]:
    return [p.source for p in passages]


def test_tokens_keep_identifiers_options_numbers_and_their_parts() -> None:
    found = tokens("Use os.path.join with --verbose in Python 3.11: ValueError in __init__")
    for token in ("os.path.join", "os", "path", "join", "--verbose", "verbose", "3.11"):
        assert token in found
    assert {"valueerror", "__init__", "python"} <= set(found)
    assert "with" not in found and "in" not in found  # English stopwords
    assert tokens("the and of") == []


def test_the_keyword_index_is_written_checksummed_and_reopened(tmp_path: Path) -> None:
    store = _store(tmp_path)
    snapshot = store.snapshot("docs")
    assert snapshot is not None
    written = sorted(
        p.relative_to(snapshot.path).as_posix() for p in (snapshot.path / KEYWORD_DIR).iterdir()
    )
    assert written and set(written) <= set(snapshot.manifest.checksums)
    store.close()

    reopened = DocumentStore(tmp_path)
    reopened.open()
    try:
        passages, info = reopened.keyword_search("docs", "ValueError", 5)
        assert _sources(passages) == ["ref/errors.txt"]
        assert (info.method, info.index, info.version) == ("bm25", "stored", "v000001")
    finally:
        reopened.close()

    damaged = snapshot.path / written[0]
    damaged.write_bytes(damaged.read_bytes()[:-1] + b"\x00")
    with pytest.raises(BrokenIndex, match=written[0]):
        Snapshot.load(snapshot.path)


def test_an_exact_identifier_dense_search_misses_is_found_by_keyword_and_hybrid(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    try:
        query = "os.path.join"
        vector = HashEmbedder().embed([query])[0]
        dense = store.search("docs", vector, 2)
        assert "ref/names.rst" not in _sources(dense)
        keyword, _ = store.keyword_search("docs", query, 2)
        assert _sources(keyword)[0] == "ref/names.rst"
        hybrid = fuse_passages(dense, keyword, 2)
        assert "ref/names.rst" in _sources(hybrid)
        found = next(p for p in hybrid if p.source == "ref/names.rst")
        assert found.found_by == ("keyword",)
        assert all(p.score > 0 for p in keyword)  # BM25 scores; only passages holding a word
        assert store.keyword_search("docs", "zebra quokka", 5)[0] == []
    finally:
        store.close()


def test_filters_apply_to_keyword_hits(tmp_path: Path) -> None:
    store = _store(tmp_path)
    try:
        everywhere, _ = store.keyword_search("docs", "path join", 10)
        assert {"guide/paths.md", "guide/more.md", "ref/names.rst"} <= set(_sources(everywhere))
        under_ref, info = store.keyword_search("docs", "path join", 10, SearchFilter("ref/"))
        assert _sources(under_ref) == ["ref/names.rst"] and info.method == "bm25-filtered"
        markdown, _ = store.keyword_search("docs", "path join", 10, SearchFilter(kinds=("md",)))
        assert set(_sources(markdown)) == {"guide/paths.md", "guide/more.md"}
        none, _ = store.keyword_search("docs", "path", 10, SearchFilter("nowhere/"))
        assert none == []
    finally:
        store.close()


def test_an_old_snapshot_without_the_keyword_index_builds_it_in_memory(tmp_path: Path) -> None:
    """A snapshot written before the index was kept answers keyword searches: the index is
    built from its chunk table at the first one (and the snapshot is left as it is)."""
    store = _store(tmp_path)
    snapshot = store.snapshot("docs")
    assert snapshot is not None
    path = snapshot.path
    store.close()
    for file in (path / KEYWORD_DIR).iterdir():
        file.unlink()
    (path / KEYWORD_DIR).rmdir()
    manifest = json.loads((path / MANIFEST).read_text())
    manifest["checksums"] = {
        k: v for k, v in manifest["checksums"].items() if not k.startswith(KEYWORD_DIR + "/")
    }
    (path / MANIFEST).write_text(json.dumps(manifest))

    old = DocumentStore(tmp_path)
    old.open()
    try:
        passages, info = old.keyword_search("docs", "os.path.join", 2)
        assert _sources(passages)[0] == "ref/names.rst" and info.index == "built"
        assert not (path / KEYWORD_DIR).exists()
    finally:
        old.close()


def test_reciprocal_rank_fusion_order() -> None:
    fused = rrf_fuse([[1, 2, 3], [3, 4, 1]], k=60)
    # 1 and 3: 1/61 + 1/63 each (a tie: first seen first); 2 and 4: 1/62 each
    assert [i for i, _ in fused] == [1, 3, 2, 4]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 63)
    assert fused[2][1] == pytest.approx(1 / 62)
    assert [i for i, _ in rrf_fuse([[5, 6], [6]])] == [6, 5]  # found by both beats first once


def test_fused_passages_say_what_found_them() -> None:
    def passage(i: int, score: float) -> Passage:
        return Passage(i, "docs", f"s{i}", "", "", "text", score)

    dense = [passage(1, 0.9), passage(2, 0.8)]
    keyword = [passage(2, 7.0), passage(3, 5.0)]
    fused = fuse_passages(dense, keyword, 2)
    assert [(p.id, p.found_by) for p in fused] == [(2, ("dense", "keyword")), (1, ("dense",))]
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61)


def test_exact_terms_decide_the_keyword_weight_in_hybrid_fusion() -> None:
    """Chosen on the evaluation (BM25 over prose questions lowered their nDCG@10): the keyword
    ranking counts in hybrid fusion only for a short query that holds an exact term."""
    assert exact_terms("Why doesn't list.sort() return the sorted list?") == ["list.sort"]
    assert exact_terms("pass --verbose, catch UnicodeDecodeError, on RS232 with __slots__") == [
        "--verbose",
        "UnicodeDecodeError",
        "RS232",
        "__slots__",
    ]
    assert exact_terms("Why are floating-point calculations thread-safe, e.g. here?") == []
    assert keyword_weight("os.path.join") == 2.0 and keyword_weight("what is a list") == 0.0
    assert keyword_weight("OSError: [Errno 9] Bad file descriptor") == 2.0  # six words
    assert keyword_weight("Why doesn't list.sort() return the sorted list?") == 0.0  # seven
    assert keyword_weight("How do I use list.sort()?") == 2.0  # a question, with an exact term
    # Not a question: a name, a phrase remembered from a clause.
    assert keyword_weight("Guido van Rossum") == 2.0
    assert keyword_weight("termination for convenience") == 2.0
    assert keyword_weight("Is a list ordered") == keyword_weight("a list, ordered?") == 0.0
    assert keyword_weight("") == keyword_weight("   ") == 0.0

    def passage(i: int) -> Passage:
        return Passage(i, "docs", f"s{i}", "", "", "text", 0.5)

    dense, keyword = [passage(1), passage(2)], [passage(3), passage(2)]
    prose = fuse_passages(dense, keyword, 3, keyword_weight=keyword_weight("how do lists grow"))
    assert [p.id for p in prose[:2]] == [1, 2] and prose[1].found_by == ("dense", "keyword")
    exact = fuse_passages(dense, keyword, 3, keyword_weight=keyword_weight("list.append"))
    assert [p.id for p in exact] == [2, 3, 1]  # the keyword ranking weighs twice the dense


def faq_over(tmp_path: Path, texts: dict[str, str]) -> Dataset:
    """A Python-FAQ-like dataset without questions over ``docs/<name>`` files of ``texts``."""
    corpus = tmp_path / "corpus"
    (corpus / "docs").mkdir(parents=True)
    for name, text in texts.items():
        (corpus / "docs" / name).write_text(text)
    return Dataset("python-faq", corpus, [], len(texts), "f" * 16)


def test_a_long_question_naming_a_rare_exact_term_brings_the_keyword_side_in(
    tmp_path: Path,
) -> None:
    """Issue 46 §2: a question of seven words or more is searched by its meaning alone, unless
    it names an exact term; then the keyword ranking weighs in proportion to how rare that term
    is in the collection (BM25's IDF over a one-chunk word's): ``ValueError``, in one chunk of
    four, weighs fully; a common word does not bring the side in at all."""
    store = _store(tmp_path / "store")
    rarity = store.keyword_rarity
    assert rarity("docs", "ValueError") == pytest.approx(1.0)  # one chunk of four holds it
    assert rarity("docs", "path") < rarity("docs", "ValueError")  # three chunks hold it
    assert rarity("docs", "zeppelin") == 0.0  # a word the index does not know

    long_question = "Why does int('x') raise a ValueError in my script?"
    in_docs = lambda terms: rarity("docs", terms)  # noqa: E731
    assert keyword_weight(long_question) == 0.0  # no index: its meaning alone, as before
    assert keyword_weight(long_question, in_docs) == pytest.approx(EXACT_TERM_WEIGHT)
    common = "Why would anyone join a path with os.path.join at all?"
    assert 0.0 < keyword_weight(common, in_docs) <= EXACT_TERM_WEIGHT
    prose = "Why would anyone want to join two paths together at all?"
    assert keyword_weight(prose, in_docs) == 0.0  # no exact term: its meaning alone
    assert keyword_weight("os.path.join", in_docs) == 2.0  # short and typed: as before


def test_the_keyword_dataset_is_drawn_reproducibly(tmp_path: Path) -> None:
    faq = faq_over(
        tmp_path,
        {
            "a.rst.txt": "Call os.path.join or pass --verbose.\n\n"
            "    ValueError: invalid literal for int()\n",
            "b.rst.txt": "See os.path.join and sys_path_hooks, 3.11.4.\n",
        },
    )
    first, again = keyword_dataset(faq, questions=10), keyword_dataset(faq, questions=10)
    assert first.name == "python-keywords" and first.questions == again.questions
    by_text = {q.text: q.relevant for q in first.questions}
    assert by_text["os.path.join"] == ("docs/a.rst.txt", "docs/b.rst.txt")
    assert by_text["--verbose"] == ("docs/a.rst.txt",)
    assert by_text["ValueError: invalid literal for int()"] == ("docs/a.rst.txt",)
    assert by_text["sys_path_hooks"] == ("docs/b.rst.txt",)
    assert by_text["3.11.4"] == ("docs/b.rst.txt",)


def test_the_phrase_dataset_is_drawn_reproducibly(tmp_path: Path) -> None:
    """Four plain words in a row, within a sentence, found in at most three documents."""
    faq = faq_over(
        tmp_path,
        {
            "a.rst.txt": "Generators yield values lazily whenever asked. Call os.path.join here.\n",
            "b.rst.txt": "Tuples remain immutable sequences forever.\n",
        },
    )
    first, again = phrase_dataset(faq), phrase_dataset(faq)
    assert first.name == "python-phrases" and first.questions == again.questions
    assert len(first.questions) == 2  # one per document
    by_text = {q.text: q.relevant for q in first.questions}
    assert set(by_text.values()) == {("docs/a.rst.txt",), ("docs/b.rst.txt",)}
    for text in by_text:
        assert len(text.split()) == 4 and text == text.lower()
        assert keyword_weight(text) == 2.0  # typed to be found by its words
    a_phrase = next(t for t, sources in by_text.items() if sources == ("docs/a.rst.txt",))
    assert a_phrase in {"generators yield values lazily", "yield values lazily whenever"}
