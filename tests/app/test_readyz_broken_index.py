"""``/readyz`` with a collection whose index is broken (issue 13, finding 8: a truncated index
file gave 500s while ``/readyz`` said ready): not ready, why only to a key holder, and a search of
that collection answers 503 naming the collection, never a 500."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.helpers.app import create_key, running_app


def test_a_truncated_index_makes_the_service_not_ready(
    seeded_data_dir: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(seeded_data_dir, data_dir)
    files = [p for p in data_dir.rglob("demo.faiss") if p.is_file()]
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
    assert list(broken) == ["demo"] and "cannot be read" in broken["demo"]
    assert search.status_code == 503
    error = search.json()["error"]
    assert error["type"] == "index_unavailable"
    assert "'demo'" in error["message"] and "re-ingest" in error["message"]
    assert str(data_dir) not in error["message"]  # a path only for /readyz's key holders
