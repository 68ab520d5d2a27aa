"""The same-work floor (``bench.harness.floor --same-work``): ragtime's inherent work for a
question, over a stored collection, and a stream shaped like ragtime's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench.harness.floor import create_floor_app
from bench.harness.same_work import SameWork
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.sse import parse_sse


@pytest.fixture(scope="module")
def same_work(seeded_data_dir: Path) -> Iterator[SameWork]:
    work = SameWork.open(seeded_data_dir, embedder=HashEmbedder())
    yield work
    work.close()


async def ask(app: object, question: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://floor") as client:
        return await client.post("/v1/ask", json={"question": question, "stream": True})


async def test_answers_a_question_with_passages_of_the_collection(same_work: SameWork) -> None:
    response = await ask(create_floor_app(5, same_work), "How do I handle exceptions with try?")
    assert response.status_code == 200
    events = parse_sse(response.text.splitlines())
    names = [name for name, _ in events]
    assert names == ["citations"] + ["token"] * 5 + ["done"]
    cited = events[0][1]["citations"]
    assert 1 <= len(cited) <= 4
    assert cited[0]["source"] == "tutorial/errors.rst.txt"
    assert all(c["source"].startswith("tutorial/") and c["text"] for c in cited)
    usage = events[-1][1]["usage"]
    assert usage["completion_tokens"] == 5
    assert usage["prompt_tokens"] > sum(len(c["text"].split()) for c in cited[:1])


def test_the_prompt_holds_the_passages_and_the_question_within_its_budget(
    same_work: SameWork,
) -> None:
    prepared = same_work.prepare("What does a list comprehension do?")
    prompt = prepared.prompt
    assert prompt.text.rstrip().endswith("<|assistant|>")
    assert "Question: What does a list comprehension do?" in prompt.text
    assert prompt.passages and prompt.context_tokens_used <= 384
    assert prompt.passages[0].passage == prepared.passages[0]


def test_a_short_query_of_exact_terms_is_searched_by_its_words_too(same_work: SameWork) -> None:
    prepared = same_work.prepare("KeyboardInterrupt")
    assert any("keyword" in p.found_by for p in prepared.passages)
    assert "KeyboardInterrupt" in prepared.passages[0].text


async def test_a_question_the_screen_rejects_is_a_400(same_work: SameWork) -> None:
    response = await ask(create_floor_app(5, same_work), "fuck you, you stupid piece of shit")
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "question_rejected"


async def test_the_bare_floor_does_no_work() -> None:
    response = await ask(create_floor_app(3), "anything")
    names = [name for name, _ in parse_sse(response.text.splitlines())]
    assert names == ["token"] * 3 + ["done"]


def test_a_data_dir_without_the_collection_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no collection 'demo'"):
        SameWork.open(tmp_path, embedder=HashEmbedder())
