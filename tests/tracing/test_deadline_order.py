"""Admission at a target that serves by the deadline it is told (an SGLang server scheduling by
priority, told each deadline as its priority): a request waits only behind those due before it,
and, where the server preempts, not behind the later ones already running; others' requests,
sent without a deadline, are served after ours. What the plan tells the serving layer."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from tests.helpers.budget_stages import Scripted
from tests.helpers.plans import LIMITS, LINEAR, Load
from tracing import metrics
from tracing.budget import (
    BudgetEngine,
    BudgetInfeasible,
    BudgetLedger,
    BudgetSession,
    GenerationPrior,
    PlanLimits,
    Reservations,
    TargetSaturated,
)
from tracing.budget.allowances import serving_need
from tracing.budget.cost_model import CostModel
from tracing.budget.errors import QueueInfeasible
from tracing.budget.serving import target_queue

GPU = GenerationPrior(fixed_ms=30.0, prefill_ms_per_token=0.05, decode_ms_per_token=10.0)


class Serving:
    earliest_deadline_first = False
    context_length = None

    def __init__(self, load: Load) -> None:
        self.load = load

    def cost_targets(self, question: str = "") -> list[str]:
        return ["gpu"]

    def target_load(self, target: str) -> Load:
        return self.load


def test_a_server_ordering_by_deadline_is_planned_as_such() -> None:
    fifo = target_queue(Load(waiting=5, max_running=4), edf=False, ours=0)
    assert (fifo.slots, fifo.edf, fifo.external) == (4, False, 5)
    edf = target_queue(Load(5, 4, earliest_deadline_first=True, preempts=True), edf=False, ours=0)
    assert (edf.slots, edf.edf, edf.preemptive) == (4, True, True)
    assert edf.external == 0, "others' requests, sent without a deadline, go after ours"


@pytest.mark.parametrize(("preemptive", "ahead"), [(True, 1), (False, 2)])
def test_only_requests_due_earlier_are_ahead_where_the_server_preempts(
    preemptive: bool, ahead: int
) -> None:
    book = Reservations()
    now = time.perf_counter()
    earlier = book.reserve("gpu", now + 0.5, 400.0)
    later = book.reserve("gpu", now + 5.0, 400.0)
    later.start()  # sent, and running
    book.reserve("gpu", now + 6.0, 400.0)  # sent later, still waiting: never ahead
    wait = book.wait("gpu", now + 1.0, slots=1, edf=True, preemptive=preemptive, now=now)
    assert wait.ahead == ahead
    assert earlier in wait.reservations and (later in wait.reservations) is not preemptive


def engine() -> BudgetEngine:
    built = BudgetEngine(
        LIMITS, PlanLimits(20, 0, 0, 0, 0, 0, 0.0), quality=LINEAR, cost=CostModel()
    )
    built.cost.seed({"rerank": 1.0, "embed": 1.0, "search": 1.0, "moderate.answer": 1.0})
    built.cost.calibrate("gpu", GPU)
    return built


def loose_requests_running(built: BudgetEngine, count: int) -> None:
    now = time.perf_counter()
    for _ in range(count):
        built.reservations.reserve("gpu", now + 5.0, 600.0).start()


def test_a_tight_question_is_admitted_ahead_of_loose_ones_where_the_server_preempts() -> None:
    preempting = engine()
    loose_requests_running(preempting, 6)
    load = Load(waiting=2, max_running=1, earliest_deadline_first=True, preempts=True)
    session = BudgetSession(preempting, BudgetLedger(700), route="/v1/ask", question="q",
                            k=4, rerank_available=False, serving=Serving(load))  # fmt: skip
    session.check_feasible()
    assert session.engine.reservations.wait("gpu", session.ledger.deadline, slots=1, edf=True,
                                            preemptive=True).ms == 0.0  # fmt: skip
    first_come = engine()
    loose_requests_running(first_come, 6)
    fifo = Serving(Load(waiting=2, max_running=1))
    session = BudgetSession(first_come, BudgetLedger(700), route="/v1/ask", question="q",
                            k=4, rerank_available=False, serving=fifo)  # fmt: skip
    with pytest.raises(TargetSaturated):
        session.check_feasible()


def test_the_serving_layer_is_told_the_plans_need() -> None:
    built = engine()
    ledger = BudgetLedger(2000)
    ordered = Serving(Load(earliest_deadline_first=True))
    session = BudgetSession(built, ledger, route="/v1/ask", question="q",
                            k=4, rerank_available=False, serving=ordered)  # fmt: skip
    plan = session.plan()
    need = serving_need(built, ledger, plan)
    assert need.deadline < ledger.deadline, "what the stages after generation need is kept"
    assert need.deadline > ledger.deadline - 1.0
    assert need.per_token_ms == pytest.approx(10.0, rel=0.2)
    assert need.output_tokens == plan.max_output_tokens
    assert need.first_token_ms >= 30.0


def test_a_request_overtaken_by_one_due_earlier_is_known() -> None:
    book = Reservations()
    now = time.perf_counter()
    loose = book.reserve("gpu", now + 5.0, 600.0)
    loose.start()
    later_still = book.reserve("gpu", now + 9.0, 600.0)
    later_still.start()
    assert not loose.overtaken(), "only a request due earlier can take its slot"
    tight = book.reserve("gpu", now + 0.7, 300.0)
    tight.start()
    assert loose.overtaken() and later_still.overtaken() and not tight.overtaken()


@dataclass
class Usage:
    prompt_tokens: int = 600
    cached_tokens: int = 0
    completion_tokens: int = 40


@dataclass
class Generated:
    """A loose answer that waited 3 s while preempted: its timings are not the engine's."""

    target: str = "gpu"
    finish_reason: str = "length"
    started: float = 0.0
    first_at: float | None = None
    usage: Usage | None = None
    queue_ms: float = 0.0
    last_at: float | None = None
    streamed_tokens: int = 40
    prompt_tokens: int = 0
    may_have_queued: bool = True
    shared_prefix_tokens: int | None = None


@pytest.mark.parametrize(("preempts", "learned"), [(True, 0), (False, 1)])
async def test_timings_a_preemption_may_have_stretched_are_not_learned(
    preempts: bool, learned: int
) -> None:
    built = engine()
    load = Load(max_running=1, earliest_deadline_first=True, preempts=preempts)
    session = BudgetSession(built, BudgetLedger(5000), route="/v1/ask", question="q",
                            k=4, rerank_available=False, serving=Serving(load))  # fmt: skip
    now = time.perf_counter()
    generated = Generated(started=now - 3.5, first_at=now - 3.0, usage=Usage())

    def overtaken(allowance: object) -> None:
        built.reservations.reserve("gpu", time.perf_counter() + 0.5, 300.0).start()

    with session:
        session.plan()
        async with session.generate(Scripted(generated, during=overtaken), None) as generation:
            assert [text async for text in generation] == []
    observed = built.cost.generation("gpu").snapshot()["observations"]
    assert observed == {"first_token": learned, "decode": learned}


def test_others_load_is_what_the_poll_found_beyond_ours_then() -> None:
    stale = Load(waiting=10, max_running=4, others=1)  # ten waited, nine of them ours
    assert target_queue(stale, edf=False, ours=2).external == 1
    told_nothing = Load(waiting=10, max_running=4)
    assert target_queue(told_nothing, edf=False, ours=6).external == 8


def refused_overloaded() -> float:
    value = metrics.REGISTRY.get_sample_value(
        "ragtime_admission_refused_total", {"route": "/v1/ask", "reason": "overloaded"}
    )
    return value or 0.0


def test_a_plan_the_queue_leaves_no_room_for_is_refused_as_overloaded_not_as_a_504() -> None:
    """Admitted at arrival, the request finds after search that the wait ahead leaves no room:
    the answer alone would fit, so the service is overloaded (503, refused before the engine),
    not the budget too small (504)."""
    built = engine()
    loose_requests_running(built, 6)
    fifo = Serving(Load(waiting=2, max_running=1))
    before = refused_overloaded()
    session = BudgetSession(built, BudgetLedger(700), route="/v1/ask", question="q",
                            k=4, rerank_available=False, serving=fifo)  # fmt: skip
    with pytest.raises(TargetSaturated, match="the queue at gpu is"):
        session.plan()
    assert refused_overloaded() == before + 1
    tiny = BudgetSession(
        built,
        BudgetLedger(60),
        route="/v1/ask",
        k=4,
        rerank_available=False,
        question="q",
        serving=fifo,
    )
    with pytest.raises(BudgetInfeasible) as raised:
        tiny.plan()
    assert not isinstance(raised.value, QueueInfeasible), "too small alone: still a 504"
