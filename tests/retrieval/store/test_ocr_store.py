"""The ``ocr`` flag of a chunk kept in the snapshot's chunk table, read back by search and shown
in the HTTP search hit; a snapshot written before the column reads as false and is carried
over (tests/retrieval/formats/test_ocr.py reads the files themselves)."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest

from app.http.schemas import SearchHit
from bench.suites.ocr import render_text
from retrieval import DocumentStore, ingest_path
from retrieval.formats.ocr import find_tesseract
from retrieval.store.layout import CHUNKS_DB, MANIFEST, Manifest, file_checksum
from tests.fakes.hash_embedder import HashEmbedder

SPANISH = ["La caldera arranca con el interruptor rojo del lado izquierdo del panel."]


def _written_before_ocr(store_root: Path) -> None:
    """The published snapshot's chunk table as it was before OCR: no ``ocr`` column (its
    manifest's checksum made to agree)."""
    (manifest_path,) = store_root.rglob(MANIFEST)
    db = sqlite3.connect(manifest_path.parent / CHUNKS_DB)
    db.execute("ALTER TABLE chunks DROP COLUMN ocr")
    db.commit()
    db.close()
    manifest = Manifest.from_json(manifest_path.read_text())
    checksums = manifest.checksums | {CHUNKS_DB: file_checksum(manifest_path.parent / CHUNKS_DB)}
    manifest_path.write_text(dataclasses.replace(manifest, checksums=checksums).to_json())


@pytest.mark.process
@pytest.mark.skipif(find_tesseract() is None, reason="tesseract-ocr is not installed")
def test_the_flag_is_stored_searched_and_old_snapshots_read_false(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("# Boiler\n\nThe boiler starts with the red switch.\n")
    embedder = HashEmbedder()
    store = DocumentStore(tmp_path / "store")
    store.open()
    ingest_path(docs, collection="c", embedder=embedder, store=store)
    store.close()
    _written_before_ocr(tmp_path / "store")
    store = DocumentStore(tmp_path / "store")
    store.open()
    (hit,) = store.search("c", embedder.embed(["boiler red switch"])[0], k=1)
    assert (hit.source, hit.ocr) == ("notes.md", False)
    render_text(SPANISH).save(docs / "caldera.png")
    ingest_path(docs, collection="c", embedder=embedder, store=store)  # notes.md carried over
    found = {p.source: p for p in store.search("c", embedder.embed(["caldera rojo"])[0], k=2)}
    assert (found["caldera.png"].ocr, found["caldera.png"].kind) == (True, "png")
    assert found["notes.md"].ocr is False
    assert SearchHit.from_passage(found["caldera.png"]).model_dump()["ocr"] is True
    store.close()
