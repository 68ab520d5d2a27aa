"""Answer modes and abstention at the HTTP boundary (``app/stages/extraction.py``,
``Pipeline.answer``): an extractive answer quotes the passages with their labels and asks no
model; a question no passage is close to abstains and spends no generation; ``auto`` falls back
to the passages' answer on an answer they do not bear out and on a budget too small for
generation, and says so; the trust signals never contradict one another or the text."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.http.answers import REPLACED_NOTE
from app.stages import ABSTENTION
from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import running_app
from tests.helpers.sse import parse_sse

QUESTION = "How do I append an item to a list?"
UNSUPPORTED = "The capital of France is Paris, a city on the Seine river."
LABEL = re.compile(r"\s*\[(\d+)\]")


@pytest.fixture
def backend() -> ScriptedBackend:
    return ScriptedBackend()


@pytest.fixture
def app(seeded_data_dir: Path, backend: ScriptedBackend) -> Iterator[TestClient]:
    with running_app(seeded_data_dir, backend=backend) as client:
        yield client


@pytest.fixture
def abstaining(seeded_data_dir: Path, backend: ScriptedBackend) -> Iterator[TestClient]:
    """An app whose threshold no passage reaches: every question abstains."""
    with running_app(seeded_data_dir, backend=backend, answerable_min_similarity=1.0) as client:
        yield client


def ask(client: TestClient, auth: dict[str, str], **body: Any) -> dict[str, Any]:
    response = client.post("/v1/ask", json={"question": QUESTION, **body}, headers=auth)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    check_signals_agree(answer)
    return answer


def check_signals_agree(answer: dict[str, Any]) -> None:
    """The combinations that must never be: the rules docs/answers.md gives the signals."""
    cited = [c for c in answer["citations"] if c["cited"]]
    method = answer["attribution"]
    assert all(c["by"] == method for c in cited), answer
    assert all(c["by"] is None for c in answer["citations"] if not c["cited"])
    if method in ("unattributed", "skipped", "empty", "abstained"):
        assert not cited, answer
    if method in ("unattributed", "empty", "abstained"):
        assert answer["grounded"] is False, answer
    if answer["answer_mode"] == "abstain":
        assert answer["answerable"] is False and method == "abstained", answer
        assert answer["answer"] == ABSTENTION
    if answer["grounded"]:
        assert answer["answerable"] and answer["answer_mode"] != "abstain", answer
    if answer["answer_mode"] == "extract":
        assert method == "extracted" and answer["usage"] is None, answer
        assert {c["label"] for c in cited} == {int(n) for n in LABEL.findall(answer["answer"])}


def passage_texts(client: TestClient, auth: dict[str, str]) -> list[str]:
    hits = client.post("/v1/search", json={"query": QUESTION, "k": 5}, headers=auth).json()
    return [" ".join(p["text"].split()) for p in hits["passages"]]


def test_an_extractive_answer_quotes_the_passages_with_their_labels(
    app: TestClient, auth: dict[str, str], backend: ScriptedBackend
) -> None:
    answer = ask(app, auth, answer_mode="extract")
    assert answer["answer_mode"] == "extract" and answer["answerable"] is True, answer
    assert backend.started_streams == 0, "no model was asked"
    assert answer["evidence_similarity"] is not None
    stages = [s["stage"] for s in answer["stages"]]
    assert "extract" in stages and "generate" not in stages
    labelled = LABEL.split(answer["answer"])
    assert len(labelled) >= 3, answer["answer"]  # at least one piece and its label
    passages = {c["label"]: c for c in answer["citations"]}
    texts = passage_texts(app, auth)
    for piece in labelled[0::2]:
        for sentence in filter(None, (s.strip() for s in piece.split("\n"))):
            assert any(" ".join(sentence.split()) in t for t in texts), sentence
    assert all(passages[int(n)]["cited"] for n in labelled[1::2])
    assert answer["grounded"] is True


def test_a_question_no_passage_is_close_to_abstains_and_spends_no_generation(
    abstaining: TestClient, auth: dict[str, str], backend: ScriptedBackend
) -> None:
    for mode in ("generate", "auto", "extract"):
        answer = ask(abstaining, auth, answer_mode=mode)
        assert answer["answer"] == ABSTENTION and answer["answer_mode"] == "abstain"
        assert answer["answerable"] is False and answer["grounded"] is False
        assert answer["citations"], "the closest passages are listed"
        assert "generate" not in [s["stage"] for s in answer["stages"]]
    assert backend.started_streams == 0


def test_auto_answers_from_the_passages_when_the_models_answer_is_not_borne_out(
    app: TestClient, auth: dict[str, str], backend: ScriptedBackend
) -> None:
    backend.deltas = [UNSUPPORTED]
    answer = ask(app, auth, answer_mode="auto")
    assert backend.started_streams == 1
    assert answer["answer_mode"] == "extract" and UNSUPPORTED not in answer["answer"]
    fell_back = [d for d in answer["degradations"] if d["action"] == "extracted"]
    assert fell_back and "not borne out" in fell_back[0]["reason"], answer["degradations"]
    assert answer["grounded"] is True


def test_generate_keeps_an_unsupported_answer_and_says_so(
    app: TestClient, auth: dict[str, str], backend: ScriptedBackend
) -> None:
    backend.deltas = [UNSUPPORTED]
    answer = ask(app, auth, answer_mode="generate")
    assert answer["answer"] == UNSUPPORTED and answer["answer_mode"] == "generate"
    assert answer["grounded"] is False
    assert not [d for d in answer["degradations"] if d["action"] == "extracted"]


def test_auto_keeps_an_answer_the_passages_bear_out(
    app: TestClient, auth: dict[str, str], backend: ScriptedBackend
) -> None:
    first = passage_texts(app, auth)[0]
    sentence = next(s for s in first.split(". ") if len(s.split()) >= 6) + "."
    backend.deltas = [sentence, " [1]"]
    answer = ask(app, auth, answer_mode="auto")
    assert answer["answer_mode"] == "generate" and answer["answer"].startswith(sentence)
    assert answer["grounded"] is True and answer["attribution"] == "model"


def test_auto_answers_from_the_passages_when_the_budget_cannot_fit_generation(
    app: TestClient, auth: dict[str, str], backend: ScriptedBackend
) -> None:
    refused = app.post(
        "/v1/ask",
        json={"question": QUESTION, "answer_mode": "generate", "budget_ms": 60},
        headers=auth,
    )
    assert refused.status_code == 504, refused.text  # today's answer in generate mode
    answer = ask(app, auth, answer_mode="auto", budget_ms=60)
    assert answer["answer_mode"] == "extract" and backend.started_streams == 0
    assert any(
        d["stage"] == "generate" and d["action"] == "extracted" for d in answer["degradations"]
    ), answer["degradations"]


def test_a_stream_in_auto_replaces_what_the_model_sent(
    app: TestClient, auth: dict[str, str], backend: ScriptedBackend
) -> None:
    backend.deltas = [UNSUPPORTED]
    response = app.post(
        "/v1/ask",
        json={"question": QUESTION, "answer_mode": "auto", "stream": True},
        headers=auth,
    )
    events = parse_sse(response.text.splitlines())
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "citations" and kinds[-1] == "done" and "token" in kinds
    assert kinds.index("replace") == len(kinds) - 2, kinds
    replaced = events[-2][1]["text"]
    done = events[-1][1]
    assert done["answer_mode"] == "extract" and UNSUPPORTED not in replaced
    assert LABEL.search(replaced)


def test_a_chat_stream_cannot_take_back_what_it_sent_and_says_so(
    app: TestClient, auth: dict[str, str], backend: ScriptedBackend
) -> None:
    backend.deltas = [UNSUPPORTED]
    response = app.post(
        "/v1/chat/completions",
        json={
            "model": backend.model,
            "messages": [{"role": "user", "content": QUESTION}],
            "stream": True,
            "answer_mode": "auto",
        },
        headers=auth,
    )
    assert response.status_code == 200, response.text
    lines = [line for line in response.text.splitlines() if line != "data: [DONE]"]
    chunks = [data for _, data in parse_sse(lines)]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text.startswith(UNSUPPORTED) and REPLACED_NOTE in text


def test_an_unknown_answer_mode_is_refused(app: TestClient, auth: dict[str, str]) -> None:
    response = app.post(
        "/v1/ask", json={"question": QUESTION, "answer_mode": "guess"}, headers=auth
    )
    assert response.status_code == 422
    assert "answer_mode" in response.text
