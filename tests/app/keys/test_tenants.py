"""Tenants: two keys, each reading its own collection, walk every route that returns collection
data, and no passage of one reaches the other (in a response body, a stream, or the model's
prompt); another tenant's collection is the 404 of one that does not exist; a scope a key lacks
is a 403."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval import DocumentStore, ingest_path
from tests.fakes.backends import PromptEchoBackend, ScriptedBackend
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.app import create_key, make_settings, running_app
from tests.helpers.sse import parse_sse

#: Each tenant's documents: the same topic (lists), told with words of its own: a marker (which
#: the other tenant puts in its questions, to pull these passages up if it could) and a secret
#: (which no question names: it can reach an answer only inside a passage).
MARKERS = {"alpha": "aardvarkian", "beta": "bumblebeeish"}
SECRETS = {"alpha": "xylophonic", "beta": "quixotical"}
TOPIC = (
    "# Lists\n\n"
    "## Appending\n\n"
    "To append an item to a list, call append on the list; extend adds every item of another "
    "list. {marker} teams append items to their lists every day, {secret}.\n\n"
    "## Sorting\n\n"
    "A list sorts in place with sort; sorted returns a new sorted list of the items. "
    "{marker} teams sort their lists of items, {secret}.\n\n"
    "## Slicing\n\n"
    "A slice of a list copies part of it: items from a start to an end index. "
    "{marker} teams slice lists too, {secret}.\n"
)
QUESTION = "How do I append an item to a list and sort the list of items?"


@pytest.fixture(scope="module")
def tenants_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir with collections ``alpha`` and ``beta`` (hash-embedded), and ``demo`` empty."""
    data_dir = tmp_path_factory.mktemp("tenants")
    embedder = HashEmbedder()
    embedder.load()
    store = DocumentStore(make_settings(data_dir).store_path)
    store.open()
    try:
        for collection, marker in MARKERS.items():
            corpus = data_dir.parent / f"{data_dir.name}-{collection}"
            corpus.mkdir()
            (corpus / f"{collection}-lists.md").write_text(
                TOPIC.format(marker=marker, secret=SECRETS[collection])
            )
            report = ingest_path(  # small chunks: a passage per section or so
                corpus,
                collection=collection,
                embedder=embedder,
                store=store,
                chunk_tokens=24,
                overlap_tokens=0,
            )
            assert report.files == 1 and report.chunks >= 3, report
    finally:
        store.close()
    return data_dir


@pytest.fixture(scope="module")
def keys(tenants_dir: Path) -> dict[str, dict[str, str]]:
    """Each tenant's auth header: ``ask`` on its own collection only."""
    return {
        name: {
            "Authorization": "Bearer "
            + create_key(tenants_dir, name, scopes=["ask"], collections=[name])
        }
        for name in MARKERS
    }


@pytest.fixture(scope="module")
def echo() -> PromptEchoBackend:
    return PromptEchoBackend()


@pytest.fixture(scope="module")
def client(tenants_dir: Path, echo: PromptEchoBackend) -> Iterator[TestClient]:
    with running_app(tenants_dir, backend=echo) as client:
        yield client


def _other(tenant: str) -> str:
    return next(name for name in MARKERS if name != tenant)


def _sources(passages: list[dict[str, Any]]) -> set[str]:
    return {p["source"] for p in passages}


def _walk(client: TestClient, tenant: str, auth: dict[str, str], question: str) -> list[str]:
    """Every route that returns collection data, asked by ``tenant`` of its own collection:
    what each returned (texts), after checking the sources it names."""
    own = {f"{tenant}-lists.md"}
    texts: list[str] = []

    search = client.post("/v1/search", json={"query": question, "collection": tenant}, headers=auth)
    assert search.status_code == 200, search.text
    assert search.json()["passages"] and _sources(search.json()["passages"]) == own
    texts.append(search.text)

    ask = client.post("/v1/ask", json={"question": question, "collection": tenant}, headers=auth)
    assert ask.status_code == 200, ask.text
    assert ask.json()["citations"] and _sources(ask.json()["citations"]) == own
    texts.append(ask.text)

    body = {"question": question, "collection": tenant, "stream": True}
    with client.stream("POST", "/v1/ask", json=body, headers=auth) as streamed:
        assert streamed.status_code == 200
        events = parse_sse(streamed.iter_lines())
    done = [data for event, data in events if event == "done"]
    assert done and _sources(done[0]["citations"]) == own
    texts.append(repr(events))

    chat_body: dict[str, Any] = {
        "model": "ragtime",
        "messages": [{"role": "user", "content": question}],
        "collection": tenant,
    }
    chat = client.post("/v1/chat/completions", json=chat_body, headers=auth)
    assert chat.status_code == 200, chat.text
    assert _sources(chat.json()["citations"]) == own
    texts.append(chat.text)

    with client.stream(
        "POST", "/v1/chat/completions", json={**chat_body, "stream": True}, headers=auth
    ) as streamed:
        assert streamed.status_code == 200
        chunks = [line for line in streamed.iter_lines() if line.startswith("data: {")]
    assert any(f'"source": "{tenant}-lists.md"' in c for c in chunks)
    texts.extend(chunks)

    listed = client.get("/v1/collections", headers=auth)
    assert listed.status_code == 200
    assert [c["name"] for c in listed.json()["collections"]] == [tenant]
    texts.append(listed.text)

    for path in ("/v1/alerts", "/v1/budget/model"):  # the admin's routes: 403, no data
        refused = client.get(path, headers=auth)
        assert refused.status_code == 403
        assert "'admin' scope" in refused.json()["error"]["message"]
        texts.append(refused.text)

    ready = client.get("/readyz", headers=auth)  # a tenant's key is not an admin's
    assert ready.json() == {"ready": True}
    texts.append(ready.text)
    return texts


@pytest.mark.parametrize("tenant", sorted(MARKERS))
def test_no_passage_crosses_between_tenants(
    client: TestClient,
    keys: dict[str, dict[str, str]],
    echo: PromptEchoBackend,
    tenant: str,
) -> None:
    other = _other(tenant)
    echo.prompts.clear()
    # Asked with the other tenant's own word: its passages would rank first, if they could.
    texts = _walk(client, tenant, keys[tenant], f"{QUESTION} {MARKERS[other]}")
    assert echo.prompts, "the answers reached the model"
    seen = "\n".join(texts + [p.text for p in echo.prompts])
    assert SECRETS[tenant] in seen
    assert SECRETS[other] not in seen
    assert f"{other}-lists.md" not in seen
    for prompt in echo.prompts:
        assert prompt.passages and all(SECRETS[other] not in p.text for p in prompt.passages)


def _not_found(response: Any) -> str:
    assert response.status_code == 404, response.text
    return str(response.json()["error"]["message"])


@pytest.mark.parametrize("tenant", sorted(MARKERS))
def test_another_tenants_collection_is_the_404_of_an_unknown_one(
    client: TestClient, keys: dict[str, dict[str, str]], tenant: str
) -> None:
    auth, other = keys[tenant], _other(tenant)

    def refusals(collection: str) -> list[str]:
        chat: dict[str, Any] = {"model": "ragtime", "messages": [{"role": "user", "content": "hi"}]}
        asks: list[tuple[str, dict[str, Any]]] = [
            ("/v1/search", {"query": "x"}),
            ("/v1/ask", {"question": "x"}),
            ("/v1/ask", {"question": "x", "stream": True}),
            ("/v1/chat/completions", chat),
            ("/v1/chat/completions", {**chat, "stream": True}),
        ]
        return [
            _not_found(client.post(path, json={**body, "collection": collection}, headers=auth))
            for path, body in asks
        ]

    theirs, nowhere = refusals(other), refusals("nowhere")
    assert [m.replace(other, "nowhere") for m in theirs] == nowhere
    for message in theirs:
        assert message == f"unknown collection {other!r}"
        assert tenant not in message and "demo" not in message


def test_the_default_collection_is_not_granted_by_default(
    client: TestClient, keys: dict[str, dict[str, str]]
) -> None:
    """A tenant that names no collection asks the default (``demo``), which is not its own."""
    response = client.post("/v1/search", json={"query": "lists"}, headers=keys["alpha"])
    assert _not_found(response) == "unknown collection 'demo'"


def test_a_key_of_every_collection_reads_both(client: TestClient, tenants_dir: Path) -> None:
    auth = {"Authorization": f"Bearer {create_key(tenants_dir, 'operator')}"}
    for tenant in MARKERS:
        hits = client.post(
            "/v1/search", json={"query": QUESTION, "collection": tenant}, headers=auth
        ).json()["passages"]
        assert _sources(hits) == {f"{tenant}-lists.md"}
    listed = client.get("/v1/collections", headers=auth).json()["collections"]
    assert {c["name"] for c in listed} == set(MARKERS)


@pytest.mark.parametrize(
    ("scopes", "path", "body"),
    [
        (["ingest"], "/v1/ask", {"question": "lists"}),
        (["ingest"], "/v1/search", {"query": "lists"}),
        (["admin"], "/v1/chat/completions", {"model": "ragtime", "messages": []}),
        (["ingest"], "/v1/models", None),
        (["ask"], "/v1/alerts", None),
        (["ask", "ingest"], "/v1/budget/model", None),
        (["ask", "admin"], "/v1/collections/alpha/documents", {"source": "a.md", "text": "t"}),
    ],
)
def test_a_route_needing_a_scope_the_key_lacks_is_403(
    client: TestClient, tenants_dir: Path, scopes: list[str], path: str, body: Any
) -> None:
    auth = {"Authorization": f"Bearer {create_key(tenants_dir, 'scoped', scopes=scopes)}"}
    if body is None:
        response = client.get(path, headers=auth)
    else:
        response = client.post(path, json=body, headers=auth)
    assert response.status_code == 403, response.text
    message = response.json()["error"]["message"]
    needed = {"/v1/alerts": "admin", "/v1/budget/model": "admin"}.get(
        path, "ingest" if path.endswith("/documents") else "ask"
    )
    assert f"lacks the {needed!r} scope" in message
    assert "ragtime keys create" in message


def test_a_tenant_key_sees_only_ready_on_readyz_and_an_admin_key_sees_more(
    client: TestClient, tenants_dir: Path, keys: dict[str, dict[str, str]]
) -> None:
    admin = {"Authorization": f"Bearer {create_key(tenants_dir, 'admin', scopes=['admin'])}"}
    assert client.get("/readyz").json() == {"ready": True}
    assert client.get("/readyz", headers=keys["alpha"]).json() == {"ready": True}
    components = client.get("/readyz", headers=admin).json()["components"]
    assert set(components["collections"]) == set(MARKERS)


def test_readyz_without_a_key_says_only_not_ready(tmp_path: Path) -> None:
    """A data dir with no collection is not ready: 503, and no word of why without a key."""
    with running_app(tmp_path, backend=ScriptedBackend()) as client:
        anonymous = client.get("/readyz")
        admin = client.get("/readyz", headers={"Authorization": f"Bearer {create_key(tmp_path)}"})
    assert anonymous.status_code == 503 and anonymous.json() == {"ready": False}
    assert admin.status_code == 503 and "index" in admin.json()["components"]
