"""``ragtime serve`` freezes its start-up heap out of the collector's full passes
(``app.frontdoor.heap``) unless ``RAGTIME_GC_FREEZE=false``, and says how many objects it froze in
``/metrics``; tried on real server processes."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.app import seed_data_dir
from tests.helpers.ports import free_port
from tests.helpers.processes import start_server, stop, wait_ready

pytestmark = pytest.mark.process

FROZEN = re.compile(r"^ragtime_heap_frozen_objects (\S+)$", re.MULTILINE)


def frozen_objects(data_dir: Path, **settings: str) -> float:
    port = free_port()
    proc = start_server(data_dir, port, **settings)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc)
        found = FROZEN.search(httpx.get(f"{url}/metrics", timeout=10.0).text)
    finally:
        stop(proc)
    assert found, "ragtime_heap_frozen_objects is not in /metrics"
    return float(found.group(1))


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# Zebras\n\nZebras have stripes.\n")
    return seed_data_dir(tmp_path / "data", corpus, HashEmbedder())


def test_serve_freezes_what_start_up_left_alive(data_dir: Path) -> None:
    # Imported modules alone hold tens of thousands of objects.
    assert frozen_objects(data_dir) > 10_000


def test_the_freeze_can_be_turned_off(data_dir: Path) -> None:
    assert frozen_objects(data_dir, gc_freeze="false") == 0
