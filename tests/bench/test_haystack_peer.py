"""The Haystack peer (``bench.peers.haystack_app``) builds over a corpus and answers a question
with streamed tokens and the passages it found, with its null generator. Needs the
``bench-peers`` extra (haystack-ai and its integrations): skipped without it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

pytest.importorskip(
    "haystack", reason="the bench-peers extra is not installed: pip install -e '.[bench-peers]'"
)
pytest.importorskip("haystack_integrations.components.embedders.sentence_transformers")

from bench.peers.haystack_app import PeerOptions, cached_document_store, create_peer_app
from tests.helpers.sse import parse_sse

pytestmark = pytest.mark.slow  # torch and the real MiniLM embed the corpus

LISTS = "Lists are mutable sequences. Use append() to add an item to the end of a list."
FILES = "Open a file with open() and read it line by line with a for loop over the file object."


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("peer-corpus")
    (root / "lists.txt").write_text(LISTS)
    (root / "files.txt").write_text(FILES)
    return root


async def test_answers_with_streamed_tokens_and_the_passages_it_found(corpus: Path) -> None:
    app = create_peer_app(PeerOptions(corpus=corpus, generator="null", tokens=4, top_k=1))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://peer") as client:
        response = await client.post(
            "/v1/ask", json={"question": "How do I add an item to a list?", "stream": True}
        )
    assert response.status_code == 200
    events = parse_sse(response.text.splitlines())
    assert [name for name, _ in events] == ["token"] * 4 + ["citations", "done"]
    assert "".join(data["text"] for name, data in events if name == "token") == "ok " * 4
    cited = events[-2][1]["citations"]
    assert [c["source"] for c in cited] == ["lists.txt"]
    assert cited[0]["text"] == LISTS
    assert events[-1][1]["usage"]["completion_tokens"] == 4


def test_the_index_is_kept_and_found_again(corpus: Path, tmp_path: Path) -> None:
    options = PeerOptions(corpus=corpus, index_cache=tmp_path)
    first = cached_document_store(options)
    kept = list(tmp_path.glob("haystack-store-*.json"))
    assert len(kept) == 1
    again = cached_document_store(options)
    assert again.count_documents() == first.count_documents() == 2
    cached_document_store(
        PeerOptions(corpus=corpus, index_cache=tmp_path, split_words=5, split_overlap=1)
    )
    assert len(list(tmp_path.glob("haystack-store-*.json"))) == 2  # another split, another
