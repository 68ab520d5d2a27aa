"""``/readyz`` with a collection whose index is broken (issue 13, finding 8: a truncated index
file gave 500s while ``/readyz`` said ready; issue 24 §3: a same-length file with flipped bytes
loaded and searched): a search of that collection answers 503 naming the collection, never a
500 nor wrong passages; the service stays ready while any collection can be served, and says
which is broken only to a key holder and on ``ragtime_collection_broken``."""

from __future__ import annotations

import shutil
from pathlib import Path

from retrieval import DocumentStore, ingest_path
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.app import create_key, make_settings, running_app


def test_a_truncated_index_makes_the_service_not_ready(
    seeded_data_dir: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(seeded_data_dir, data_dir)
    files = [p for p in data_dir.rglob("*.faiss") if p.is_file() and "demo" in p.parts]
    assert files, "the seeded data dir holds the demo collection's index"
    for path in files:
        path.write_bytes(path.read_bytes()[:100])  # truncated
    auth = {"Authorization": f"Bearer {create_key(data_dir)}"}
    with running_app(data_dir, generation_backend="null") as client:
        anonymous = client.get("/readyz")
        keyed = client.get("/readyz", headers=auth)
        search = client.post("/v1/search", json={"query": "lists"}, headers=auth)
    assert anonymous.status_code == 503
    assert anonymous.json() == {"ready": False}  # no paths, no names
    assert keyed.status_code == 503
    broken = keyed.json()["components"]["broken_indexes"]
    assert list(broken) == ["demo"] and "index.faiss does not match its checksum" in broken["demo"]
    assert search.status_code == 503
    error = search.json()["error"]
    assert error["type"] == "index_unavailable"
    assert "'demo'" in error["message"] and "re-ingest" in error["message"]
    assert str(data_dir) not in error["message"]  # a path only for /readyz's key holders


def test_one_broken_collection_leaves_the_service_ready_for_the_others(
    seeded_data_dir: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(seeded_data_dir, data_dir)
    store = DocumentStore(make_settings(data_dir).store_path)
    store.open()
    try:
        embedder = HashEmbedder()
        notes = tmp_path / "notes"
        notes.mkdir()
        (notes / "tea.md").write_text("# Tea\n\nGreen tea steeps for two minutes.\n")
        ingest_path(notes, collection="notes", embedder=embedder, store=store)
    finally:
        store.close()
    for path in [p for p in data_dir.rglob("*.faiss") if "notes" in p.parts]:
        data = bytearray(path.read_bytes())  # the same length, 16 bytes flipped
        data[len(data) // 2 : len(data) // 2 + 16] = bytes(
            b ^ 0xFF for b in data[len(data) // 2 : len(data) // 2 + 16]
        )
        path.write_bytes(bytes(data))
    auth = {"Authorization": f"Bearer {create_key(data_dir)}"}
    with running_app(data_dir, generation_backend="null") as client:
        ready = client.get("/readyz", headers=auth)
        broken = client.post(
            "/v1/search", json={"query": "green tea", "collection": "notes"}, headers=auth
        )
        served = client.post("/v1/search", json={"query": "lists"}, headers=auth)
        scraped = client.get("/metrics").text
    assert ready.status_code == 200, ready.text
    assert list(ready.json()["components"]["broken_indexes"]) == ["notes"]
    assert broken.status_code == 503 and broken.json()["error"]["type"] == "index_unavailable"
    assert served.status_code == 200 and served.json()["passages"]
    assert 'ragtime_collection_broken{collection="notes"} 1.0' in scraped
    assert 'ragtime_collection_broken{collection="demo"} 0.0' in scraped
