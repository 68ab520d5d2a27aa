"""A crash at any point of an ingest leaves the previous snapshot served and intact: a real
``ragtime ingest`` process (``tests/helpers/hash_cli.py``) is SIGKILLed mid-embedding and
between each publish step, then the store is searched and the next ingest must succeed."""

from __future__ import annotations

import select
import signal
from pathlib import Path

import pytest

from retrieval import DocumentStore, ingest_path
from retrieval.store.publishing import collection_lock
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.processes import run_ingest, start_ingest

OLD = {
    "lists.md": "# Lists\n\nA list holds items in order.\n",
    "dicts.md": "# Dicts\n\nA dict maps keys to values.\n",
    "loops.md": "# Loops\n\nA for loop walks a sequence.\n",
}


def _store(data_dir: Path) -> DocumentStore:
    store = DocumentStore(data_dir / "store", embedding_model="hash-embedder")
    store.open()
    return store


def _texts(store: DocumentStore, query: str) -> list[str]:
    vector = HashEmbedder().embed([query])[0]
    return [p.text for p in store.search("notes", vector, 10)]


@pytest.mark.process
@pytest.mark.parametrize(
    ("crash_at", "published"),
    [
        ("embed:2", False),  # one changed file embedded and staged, the next not
        ("before:rename_into_place", False),  # the new snapshot fully written, not named
        ("before:point_current", False),  # named, CURRENT still the old
        ("after:point_current", True),  # CURRENT replaced: the new one is served
    ],
)
def test_a_killed_ingest_leaves_the_previous_snapshot(
    tmp_path: Path, crash_at: str, published: bool
) -> None:
    docs, data_dir = tmp_path / "docs", tmp_path / "data"
    docs.mkdir()
    for name, text in OLD.items():
        (docs / name).write_text(text)
    store = _store(data_dir)
    ingest_path(docs, collection="notes", embedder=HashEmbedder(), store=store)
    store.close()
    (docs / "lists.md").write_text("# Lists\n\nA list grows with append, a zebra stripe.\n")
    (docs / "dicts.md").write_text("# Dicts\n\nA dict maps keys, a zebra crossing.\n")
    (docs / "loops.md").unlink()

    killed = run_ingest(data_dir, docs, "--collection", "notes", crash_at=crash_at)
    assert killed.returncode == -signal.SIGKILL, killed.stderr

    folder = data_dir / "store" / "collections" / "notes" / "snapshots"
    store = _store(data_dir)  # the next start removes what the killed build left
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".building-")]
    snapshot = store.snapshot("notes")
    assert snapshot is not None
    if published:
        assert snapshot.version == "v000002"
        assert store.sources("notes") == ["dicts.md", "lists.md"]
    else:
        assert snapshot.version == "v000001"
        assert store.sources("notes") == ["dicts.md", "lists.md", "loops.md"]
        assert not any("zebra" in text for text in _texts(store, "zebra list dict"))
        assert any("for loop" in text for text in _texts(store, "loop sequence"))
    store.close()

    again = run_ingest(data_dir, docs, "--collection", "notes")
    assert again.returncode == 0, again.stderr
    store = _store(data_dir)
    assert store.sources("notes") == ["dicts.md", "lists.md"]
    assert sum("zebra" in text for text in _texts(store, "zebra")) == 2
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]  # cleaned up
    store.close()
    if not published:
        assert "2 changed, 0 unchanged, 1 removed" in again.stdout


@pytest.mark.process
def test_a_second_writer_waits_for_the_first(tmp_path: Path) -> None:
    """The collection's flock orders writers across processes: an ingest started while another
    holds it waits, and publishes once the lock is free."""
    docs, data_dir = tmp_path / "docs", tmp_path / "data"
    docs.mkdir()
    (docs / "lists.md").write_text(OLD["lists.md"])
    folder = data_dir / "store" / "collections" / "notes"
    with collection_lock(folder):  # this process is the first writer
        waiting = start_ingest(data_dir, docs, "--collection", "notes")
        assert waiting.stderr is not None
        readable, _, _ = select.select([waiting.stderr], [], [], 60)  # the ingest at the lock
        assert readable, "the waiting ingest said nothing within 60 s"
        said = waiting.stderr.readline()
        assert "another writer holds it; waiting" in said, said
        assert waiting.poll() is None and not (folder / "CURRENT").exists()
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, said + err
    assert "published snapshot v000001" in out
    store = _store(data_dir)
    assert store.sources("notes") == ["lists.md"]
    store.close()


def test_a_live_writers_staging_is_not_a_leftover(tmp_path: Path) -> None:
    """Opening the store removes half-built snapshots only when no writer holds the
    collection: another process's build in progress is left alone."""
    data_dir = tmp_path / "data"
    folder = data_dir / "store" / "collections" / "notes"
    staging = folder / "snapshots" / ".building-v000001-99999"
    staging.mkdir(parents=True)
    with collection_lock(folder):  # a writer at work
        _store(data_dir).close()
        assert staging.is_dir()
    _store(data_dir).close()  # nobody writes: a leftover
    assert not staging.exists()
