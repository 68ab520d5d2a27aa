"""``POST /v1/search`` in each ``mode`` (dense, keyword, hybrid), what found each hit, the
keyword stage's own span, filters on keyword hits, a 422 for an unknown mode, and ``/v1/ask``
searching in the configured ``RAGTIME_SEARCH_MODE``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import app_state, create_key, running_app, seed_files
from tests.helpers.spans import attributes, number, text
from tracing.budget import GenerationPrior

#: Two decoys repeat the words of ``os.path.join``; the file that holds the identifier is long
#: and about other things, so the bag-of-words embedder ranks it last.
FILES = {
    "guide/paths.md": "# Paths\n\nPath join: join a path to a path. Os path join path.\n",
    "guide/more.md": "# More\n\nThe os module: a path, another path, join them; os path join.\n",
    "ref/names.rst": (
        "Names\n=====\n\nBuilding file names portably across systems is done with "
        "os.path.join, which takes any number of segments; unrelated prose about encodings, "
        "locales, terminals, archives, compression levels and network sockets follows.\n"
    ),
}
QUERY = "os.path.join"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return seed_files(tmp_path_factory.mktemp("data"), tmp_path_factory.mktemp("corpus"), FILES)


@pytest.fixture(scope="module")
def client(data_dir: Path) -> Iterator[tuple[TestClient, dict[str, str]]]:
    headers = {"Authorization": f"Bearer {create_key(data_dir)}"}
    with running_app(data_dir, backend=ScriptedBackend(), search_mode="dense") as test_client:
        yield test_client, headers


def _search(client: tuple[TestClient, dict[str, str]], **body: Any) -> list[dict[str, Any]]:
    test_client, headers = client
    response = test_client.post(
        "/v1/search", json={"query": QUERY, "k": 2, **body}, headers=headers
    )
    assert response.status_code == 200, response.text
    passages: list[dict[str, Any]] = response.json()["passages"]
    return passages


def test_each_mode_and_what_found_each_hit(client: tuple[TestClient, dict[str, str]]) -> None:
    dense = _search(client)  # the setting's mode: dense here
    assert "ref/names.rst" not in [p["source"] for p in dense]
    assert all(p["found_by"] == ["dense"] for p in dense)
    assert [p["found_by"] for p in _search(client, mode="dense")] == [["dense"]] * len(dense)

    keyword = _search(client, mode="keyword")
    assert keyword[0]["source"] == "ref/names.rst" and keyword[0]["found_by"] == ["keyword"]

    hybrid = _search(client, mode="hybrid")
    found = {p["source"]: p["found_by"] for p in hybrid}
    assert found["ref/names.rst"] == ["keyword"] and ["dense"] in found.values()
    # The identifier and a word: both rankings find the decoys (by "path").
    words = _search(client, mode="hybrid", query="os.path.join path", k=3)
    assert ["dense", "keyword"] in [p["found_by"] for p in words]


def test_each_score_says_what_it_is(client: tuple[TestClient, dict[str, str]]) -> None:
    """A hybrid score (a fused rank score, about 0.016) is not a broken cosine: each passage
    says which kind its score is, the hybrid ones whether or not the keyword side ran."""
    dense = _search(client, mode="dense")
    assert {p["score_kind"] for p in dense} == {"cosine"} and all(p["score"] <= 1 for p in dense)
    assert {p["score_kind"] for p in _search(client, mode="keyword")} == {"bm25"}
    hybrid = _search(client, mode="hybrid")
    assert {p["score_kind"] for p in hybrid} == {"rrf"} and hybrid[0]["score"] < 0.1
    question = _search(client, mode="hybrid", query="how do I join a path?")  # dense alone
    assert {p["score_kind"] for p in question} == {"rrf"}


def test_hybrid_search_runs_no_keyword_side_for_a_question(
    client: tuple[TestClient, dict[str, str]], spans: InMemorySpanExporter
) -> None:
    """A question with no exact term weighs the keyword ranking at 0 in the fusion: the stage
    would be time spent for nothing, so it does not run, and the dense order stands."""
    question = "how do I join a path?"
    plain = _search(client, mode="hybrid", query=question, k=3)
    assert all(p["found_by"] == ["dense"] for p in plain)
    dense = _search(client, query=question, k=3)
    assert [p["source"] for p in plain] == [p["source"] for p in dense]
    assert "keyword" not in {s.name for s in spans.get_finished_spans()}


def test_filters_apply_to_keyword_hits(client: tuple[TestClient, dict[str, str]]) -> None:
    guides = _search(client, mode="keyword", source_prefix="guide/", k=5, query="path join")
    assert sorted(p["source"] for p in guides) == ["guide/more.md", "guide/paths.md"]
    rst = _search(client, mode="hybrid", kind="rst", k=5)
    assert [p["source"] for p in rst] == ["ref/names.rst"]


@pytest.mark.parametrize("mode", ["sparse", "", 3, ["dense"]])
def test_an_unknown_mode_is_a_422_naming_the_field(
    client: tuple[TestClient, dict[str, str]], mode: object
) -> None:
    test_client, headers = client
    response = test_client.post("/v1/search", json={"query": QUERY, "mode": mode}, headers=headers)
    assert response.status_code == 422, response.text
    assert "mode" in response.json()["error"]["message"]


def test_the_keyword_stage_has_its_own_span_with_its_timing(
    client: tuple[TestClient, dict[str, str]], spans: InMemorySpanExporter
) -> None:
    _search(client, mode="hybrid", kind="rst")
    finished = spans.get_finished_spans()
    keyword = next(s for s in finished if s.name == "keyword")
    assert next(s for s in finished if s.name == "search")  # and the dense one beside it
    assert number(keyword, "ragtime.stage.duration_ms") >= 0.0
    assert text(keyword, "ragtime.keyword.method") == "bm25-filtered"
    assert text(keyword, "ragtime.keyword.index") == "stored"
    assert number(keyword, "ragtime.keyword.results") == 1

    spans.clear()
    _search(client, mode="keyword")
    names = {s.name for s in spans.get_finished_spans()}
    assert "keyword" in names and "search" not in names and "embed" not in names


def test_ask_searches_in_the_configured_mode(data_dir: Path, spans: InMemorySpanExporter) -> None:
    headers = {"Authorization": f"Bearer {create_key(data_dir)}"}
    with running_app(data_dir, backend=ScriptedBackend(), search_mode="keyword") as test_client:
        response = test_client.post(
            "/v1/ask", json={"question": f"How do I use {QUERY}?"}, headers=headers
        )
    assert response.status_code == 200, response.text
    names = {s.name for s in spans.get_finished_spans()}
    assert "keyword" in names and "search" not in names
    citations = response.json()["citations"]
    assert citations[0]["source"] == "ref/names.rst" and citations[0]["found_by"] == ["keyword"]


def test_the_budget_drops_the_keyword_side_when_it_does_not_fit_and_says_so(
    data_dir: Path, spans: InMemorySpanExporter
) -> None:
    """The cost model says a keyword search takes 5 s; the budget is 3 s. The answer is planned
    without it (a degradation on the keyword span), the dense order stands, and the answer
    comes."""
    headers = {"Authorization": f"Bearer {create_key(data_dir)}"}
    rates = GenerationPrior(fixed_ms=0.0, prefill_ms_per_token=1.0, decode_ms_per_token=10.0)
    with running_app(data_dir, backend=ScriptedBackend(), search_mode="hybrid") as test_client:
        app_state(test_client).budget.cost.seed({"keyword": 5000.0}, rates)
        response = test_client.post(
            "/v1/ask",
            json={"question": f"How do I use {QUERY}?", "budget_ms": 3000},
            headers=headers,
        )
    assert response.status_code == 200, response.text
    body = response.json()
    [skipped] = [d for d in body["degradations"] if d["action"] == "keyword_skipped"]
    assert skipped["stage"] == "keyword"
    assert skipped["reason"].endswith("the smallest plan fits only without it")
    assert all(c["found_by"] == ["dense"] for c in body["citations"])
    keyword = next(s for s in spans.get_finished_spans() if s.name == "keyword")
    assert attributes(keyword)["ragtime.degraded"] == "keyword_skipped"
    assert "ragtime.keyword.results" not in attributes(keyword)


def test_the_keyword_index_is_loaded_before_the_first_search(data_dir: Path) -> None:
    """Loading it (and importing bm25s) is start-up's work, not the first request's."""
    with running_app(data_dir, backend=ScriptedBackend(), search_mode="hybrid") as test_client:
        store = app_state(test_client).services.store
        [name] = store.collections()
        snapshot = store.snapshot(name)
        assert snapshot is not None and snapshot.keyword_source == "stored"
        assert snapshot._keyword is not None  # loaded, with no search made
