"""A running server picks up a snapshot that another process publishes, without a restart,
and answers every search meanwhile (before snapshots it answered empty passages or 500s until
restarted). Then the issue-14 case: two server processes over one data dir both swap."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.fakes.backends import ScriptedBackend
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.app import create_key, running_app, seed_data_dir
from tests.helpers.ports import free_port
from tests.helpers.processes import run_ingest, start_server, stop, wait_ready

pytestmark = pytest.mark.process

OLD = {"lists.md": "# Lists\n\nA list holds items in order.\n"}
NEW = {
    "lists.md": "# Lists\n\nA list holds zebra items in order.\n",
    "zoo.md": "# Zoo\n\nA zebra lives in the zoo with other zebra friends.\n",
}


def _corpus(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in files.items():
        (folder / name).write_text(body)
    return folder


def _seeded(tmp_path: Path) -> Path:
    return seed_data_dir(tmp_path / "data", _corpus(tmp_path / "old", OLD), HashEmbedder())


def test_a_running_server_swaps_to_a_snapshot_ingested_elsewhere(tmp_path: Path) -> None:
    data_dir = _seeded(tmp_path)
    headers = {"Authorization": f"Bearer {create_key(data_dir)}"}
    body = {"query": "zebra list items", "k": 5}
    statuses: list[tuple[int, int]] = []  # (status, passages) of every search meanwhile
    stop_searching = threading.Event()
    with running_app(data_dir, backend=ScriptedBackend(), snapshot_poll_s=0.1) as client:

        def search() -> list[str]:
            response = client.post("/v1/search", json=body, headers=headers)
            passages = response.json().get("passages", [])
            statuses.append((response.status_code, len(passages)))
            return [p["text"] for p in passages]

        def keep_searching() -> None:
            while not stop_searching.is_set():
                search()

        assert not any("zebra" in t for t in search())
        searcher = threading.Thread(target=keep_searching)
        searcher.start()
        try:
            # Rebuild: the collection is replaced whole, as `ingest --rebuild` did before.
            new_docs = _corpus(tmp_path / "new", NEW)
            done = run_ingest(data_dir, new_docs, "--collection", "demo", "--rebuild")
            assert done.returncode == 0, done.stderr
            deadline = time.monotonic() + 10
            while not any("zebra" in t for t in search()):
                assert time.monotonic() < deadline, "the server never picked up the snapshot"
                time.sleep(0.05)
        finally:
            stop_searching.set()
            searcher.join()
        assert sum("zebra" in t for t in search()) == 2
    assert len(statuses) > 3
    assert all(status == 200 and n > 0 for status, n in statuses), statuses


@pytest.mark.slow
def test_two_server_processes_pick_up_one_new_snapshot(tmp_path: Path) -> None:
    """Slow: starts two `ragtime serve` processes (each loads the moderation classifier; about
    30 s on 2 cores), though no embedding or generation model."""
    data_dir = _seeded(tmp_path)
    headers = {"Authorization": f"Bearer {create_key(data_dir)}"}
    ports = [free_port(), free_port()]
    servers = [start_server(data_dir, port, snapshot_poll_s="0.2") for port in ports]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        for url, server in zip(urls, servers, strict=True):
            wait_ready(url, server)

        def zebras(url: str) -> int:
            response = httpx.post(
                f"{url}/v1/search", json={"query": "zebra", "k": 5}, headers=headers, timeout=10
            )
            assert response.status_code == 200, response.text
            return sum("zebra" in p["text"] for p in response.json()["passages"])

        assert [zebras(url) for url in urls] == [0, 0]
        done = run_ingest(data_dir, _corpus(tmp_path / "old", NEW), "--collection", "demo")
        assert done.returncode == 0, done.stderr
        assert "1 added, 1 changed, 0 unchanged, 0 removed" in done.stdout
        deadline = time.monotonic() + 15
        while [zebras(url) for url in urls] != [2, 2]:
            assert time.monotonic() < deadline, [zebras(url) for url in urls]
            time.sleep(0.1)
    finally:
        for server in servers:
            stop(server)


def test_hot_pickup_can_be_switched_off(tmp_path: Path) -> None:
    data_dir = _seeded(tmp_path)
    headers = {"Authorization": f"Bearer {create_key(data_dir)}"}
    with running_app(data_dir, backend=ScriptedBackend(), snapshot_poll_s=0) as client:
        done = run_ingest(data_dir, _corpus(tmp_path / "new", NEW), "--collection", "demo")
        assert done.returncode == 0, done.stderr
        time.sleep(0.5)
        response = client.post("/v1/search", json={"query": "zebra"}, headers=headers)
        assert response.status_code == 200
        assert not any("zebra" in p["text"] for p in response.json()["passages"])
