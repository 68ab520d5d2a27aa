"""A request's planned generation time is held at its target from its plan on
(``BudgetSession.plan``), and given back however the request ends before it generates."""

from __future__ import annotations

from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import app_state, running_app


class Broken(RuntimeError):
    """What the broken stage raises."""


@pytest.mark.parametrize("stage", ["screen_passages", "assemble"])
def test_a_request_that_fails_after_its_plan_gives_the_time_back(
    seeded_data_dir: Path, auth: dict[str, str], monkeypatch: Any, stage: str
) -> None:
    """The plan held the time while rerank ran; a stage after it fails, and the target is
    free for the next request (else the time stays held until the failed request's deadline)."""
    backend = ScriptedBackend(["an answer"])
    with running_app(seeded_data_dir, backend=backend) as client:
        stages = app_state(client).services.stages
        reservations = app_state(client).budget.reservations
        held: list[int] = []
        method = {"screen_passages": "screen_passages", "assemble": "assemble_prompt"}[stage]

        async def broken(*args: object, **kwargs: object) -> None:
            held.append(reservations.open(backend.cost_target()))
            raise Broken("the stage broke")

        monkeypatch.setattr(getattr(stages, stage), method, broken)
        response = client.post("/v1/ask", json={"question": "What is a list?"}, headers=auth)
        assert response.status_code == 500
        assert held == [1]  # held from the plan, before the stage ran
        assert reservations.open(backend.cost_target()) == 0


def test_an_answer_abandoned_before_its_generation_began_gives_the_time_back(
    seeded_data_dir: Path, auth: dict[str, str], monkeypatch: Any
) -> None:
    """The client goes away between the plan and the answer's first step (the answer's
    generator is closed before it ever ran, so generation never held the time to release it)."""
    from app.http import answers
    from app.http.disconnects import ClientGone

    async def gone_at_once(request: object, work: Coroutine[Any, Any, Any], *, what: str) -> Any:
        work.close()  # never started
        raise ClientGone(f"the client went away before {what} was ready")

    backend = ScriptedBackend(["an answer"])
    monkeypatch.setattr(answers, "while_connected", gone_at_once)
    with running_app(seeded_data_dir, backend=backend) as client:
        client.post("/v1/ask", json={"question": "What is a list?"}, headers=auth)
        assert app_state(client).budget.reservations.open(backend.cost_target()) == 0
