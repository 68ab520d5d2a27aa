"""The client of ``ragtime eval answers`` (app/evaluation/client.py) and answer modes: it sends
``answer_mode`` only for a run that names one, reads the mode that wrote the answer and the
server's ``answerable`` verdict from the stream's report, and reads both as unknown from a
server that sends neither."""

from __future__ import annotations

import httpx

from app.evaluation.client import AnswersClient
from app.evaluation.dataset import Case
from tests.fakes.answer_modes import ABSTAINED, AnswerModesServer

DEFAULTS = Case.model_validate(
    {
        "id": "default",
        "kind": "answerable",
        "question": "How do I give a parameter a default value?",
        "sources": [{"source": "defaults.md", "section": ""}],
        "facts": [["name=value"]],
    }
)
DJANGO = Case.model_validate(
    {"id": "django", "kind": "unanswerable", "question": "How big is a Django connection pool?"}
)


def client(server: AnswerModesServer) -> AnswersClient:
    return AnswersClient(
        "http://ragtime.test", "rt_key", "eval-x", transport=httpx.MockTransport(server)
    )


def test_the_mode_is_sent_only_when_a_run_names_one() -> None:
    server = AnswerModesServer()
    with client(server) as asking:
        asking.ask(DEFAULTS, budget_ms=None, ttft_target_ms=None)
        asking.ask(DEFAULTS, budget_ms=4000, ttft_target_ms=None, answer_mode="extract")
    assert "answer_mode" not in server.bodies[0] and "budget_ms" not in server.bodies[0]
    assert server.bodies[1]["answer_mode"] == "extract" and server.bodies[1]["budget_ms"] == 4000


def test_the_report_says_which_mode_wrote_the_answer_and_whether_it_was_answerable() -> None:
    with client(AnswerModesServer()) as asking:
        extracted = asking.ask(DEFAULTS, budget_ms=None, ttft_target_ms=None, answer_mode="extract")
        abstained = asking.ask(DJANGO, budget_ms=None, ttft_target_ms=None, answer_mode="auto")
    assert (extracted.status, extracted.answer_mode, extracted.answerable) == (200, "extract", True)
    assert extracted.right and not extracted.refused
    assert abstained.answer.strip() == ABSTAINED and abstained.answer_mode == "abstain"
    assert abstained.answerable is False and abstained.refused and abstained.right


def test_an_older_server_sends_neither_and_refuses_a_mode_it_does_not_know() -> None:
    with client(AnswerModesServer(knows_modes=False)) as asking:
        answered = asking.ask(DEFAULTS, budget_ms=None, ttft_target_ms=None)
        refused = asking.ask(DEFAULTS, budget_ms=None, ttft_target_ms=None, answer_mode="auto")
    assert answered.status == 200 and answered.right
    assert (answered.answer_mode, answered.answerable) == (None, None)
    assert refused.status == 422 and "answer_mode" in refused.error and not refused.answered


def test_an_answer_auto_replaced_is_scored_as_replaced() -> None:
    loops = DEFAULTS.model_copy(update={"id": "except", "question": "How do I catch an exception?"})
    with client(AnswerModesServer()) as asking:
        replaced = asking.ask(loops, budget_ms=None, ttft_target_ms=None, answer_mode="auto")
    assert replaced.answer == "Write it as name=value. Use try and except ValueError."
    assert replaced.answer_mode == "extract" and replaced.right and not replaced.loop
