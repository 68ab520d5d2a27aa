"""``POST /v1/search``: metadata filters (source prefix, file type), the search limit of its
own, ``kind`` and ``page`` on hits, the index on the search span, and 422s that say what is
wrong."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import create_key, running_app, seed_files
from tests.helpers.spans import number, text

FILES = {
    "guide/lists.md": "# Lists\n\nA list holds items in order. Lists grow with append.\n",
    "guide/loops.rst": "Loops\n=====\n\nA for loop walks over the items of a list.\n",
    "faq/lists.txt": "Lists\n\nWhy are lists mutable? A list holds items you may change.\n",
    "faq/dicts.md": "# Dicts\n\nA dict maps keys to items.\n",
}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return seed_files(tmp_path_factory.mktemp("data"), tmp_path_factory.mktemp("corpus"), FILES)


@pytest.fixture(scope="module")
def client(data_dir: Path) -> Iterator[tuple[TestClient, dict[str, str]]]:
    headers = {"Authorization": f"Bearer {create_key(data_dir)}"}
    with running_app(
        data_dir, backend=ScriptedBackend(), max_top_k=2, top_k=2, max_search_k=30
    ) as test_client:
        yield test_client, headers


def _search(client: tuple[TestClient, dict[str, str]], **body: object) -> dict[str, object]:
    test_client, headers = client
    response = test_client.post("/v1/search", json={"query": "list items", **body}, headers=headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


def _sources(result: dict[str, object]) -> list[str]:
    passages = result["passages"]
    assert isinstance(passages, list)
    return [p["source"] for p in passages]


def test_hits_carry_kind_and_page(client: tuple[TestClient, dict[str, str]]) -> None:
    result = _search(client, k=10)
    passages = result["passages"]
    assert isinstance(passages, list) and len(passages) == 4
    kinds = {p["source"]: (p["kind"], p["page"]) for p in passages}
    assert kinds["guide/loops.rst"] == ("rst", None) and kinds["faq/lists.txt"] == ("txt", None)


def test_source_prefix_and_kind_filter(client: tuple[TestClient, dict[str, str]]) -> None:
    assert sorted(_sources(_search(client, k=10, source_prefix="faq/"))) == [
        "faq/dicts.md",
        "faq/lists.txt",
    ]
    assert sorted(_sources(_search(client, k=10, kind="md"))) == ["faq/dicts.md", "guide/lists.md"]
    assert sorted(_sources(_search(client, k=10, kind=["md", "rst"], source_prefix="guide/"))) == [
        "guide/lists.md",
        "guide/loops.rst",
    ]
    assert _sources(_search(client, k=10, source_prefix="nowhere/")) == []


def test_search_k_has_its_own_limit(client: tuple[TestClient, dict[str, str]]) -> None:
    """max_top_k is 2 here (the prompt's limit); a search may ask for up to max_search_k."""
    assert len(_search(client, k=4)["passages"]) == 4  # type: ignore[arg-type]
    test_client, headers = client
    response = test_client.post("/v1/search", json={"query": "x", "k": 31}, headers=headers)
    assert response.status_code == 422
    assert response.json()["error"]["message"] == "k: must be at most 30, got 31"
    ask = test_client.post("/v1/ask", json={"question": "lists?", "top_k": 3}, headers=headers)
    assert ask.status_code == 422 and "top_k" in ask.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"kind": "MD"}, "kind", "lowercase letters or digits"),
        ({"kind": ["md", ""]}, "kind", "got ''"),
        ({"kind": "pdf"}, "kind", "holds no 'pdf' files; its file types are ['md', 'rst', 'txt']"),
        ({"source_prefix": "/etc/"}, "source_prefix", "relative to the ingest root"),
        ({"source_prefix": "a\x00b"}, "source_prefix", "control characters"),
        ({"source_prefix": "x" * 1025}, "source_prefix", "the limit is 1024"),
        ({"kind": 3}, "kind", ""),
    ],
)
def test_bad_filters_are_422_naming_the_field(
    client: tuple[TestClient, dict[str, str]], body: dict[str, object], field: str, says: str
) -> None:
    test_client, headers = client
    response = test_client.post("/v1/search", json={"query": "lists", **body}, headers=headers)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert field in error["message"] and says in error["message"]


def test_the_search_span_carries_the_index(
    client: tuple[TestClient, dict[str, str]], spans: InMemorySpanExporter
) -> None:
    _search(client, k=3, kind="md")
    search = next(s for s in spans.get_finished_spans() if s.name == "search")
    assert text(search, "ragtime.index.kind") == "flat"
    assert text(search, "ragtime.index.snapshot") == "v000001"
    assert text(search, "ragtime.search.method") == "exact-filtered"
    assert text(search, "ragtime.search.filter.kind") == "md"
    assert text(search, "ragtime.index.device").startswith("cpu: ")
    assert number(search, "ragtime.search.k") == 3
