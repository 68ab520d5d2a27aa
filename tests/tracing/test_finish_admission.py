"""Admission by predicted finish (issue 22 §1), the model alone: who is ahead, what is predicted,
what it learns."""

from __future__ import annotations

import time

import pytest

from tracing.budget import CostModel
from tracing.budget.door.book import LAG_LEARN_MIN, PRIOR_WEIGHT, FinishAdmission
from tracing.budget.door.pace import THROUGHPUT_HALF_LIFE_S
from tracing.budget.door.ticket import Refusal, Ticket

ASK = "/v1/ask"


class Clock:
    """The cost model's clock, moved by hand (the book's own times are passed as ``now``)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def admitted(decision: Ticket | Refusal) -> Ticket:
    assert isinstance(decision, Ticket), decision
    return decision


def past_the_first(book: FinishAdmission) -> FinishAdmission:
    """``book`` after its route's first request alone, which it does not learn from."""
    admitted(book.issue(ASK, arrived=time.perf_counter(), budget_ms=60_000.0)).finish()
    return book


def past_the_first_burst(book: FinishAdmission) -> FinishAdmission:
    """``book`` after its first stretch of overlapped work, which it does not learn from (long
    ago: the times a test passes come after it)."""
    burst(book, 2, start=time.perf_counter() - 10_000.0, took_s=0.001)
    assert not book.snapshot()["first_burst"]
    return book


def test_a_processs_first_request_of_a_route_is_not_learned_from() -> None:
    """It pays one-time costs (the models' first runs): taken as a request's cost, it made a
    fresh process refuse what it could answer."""
    book = FinishAdmission(cores=1, prior_alone_ms=10.0, pace=CostModel().door)
    first = admitted(book.issue(ASK, arrived=time.perf_counter(), budget_ms=60_000.0))
    time.sleep(0.2)
    first.finish()
    assert book.alone_ms(ASK) == 10.0 and book.snapshot()["alone_ms"] == {}
    second = admitted(book.issue(ASK, arrived=time.perf_counter(), budget_ms=60_000.0))
    time.sleep(0.05)
    second.finish()  # learned: one slow time does not carry the lower quartile past the prior
    assert book.alone_ms(ASK) == 10.0 and book.snapshot()["alone_ms"] == {ASK: 10.0}
    for _ in range(3):
        ticket = admitted(book.issue(ASK, arrived=time.perf_counter(), budget_ms=60_000.0))
        time.sleep(0.05)
        ticket.finish()
    assert book.alone_ms(ASK) >= 50.0  # four do
    search = "/v1/search"  # each route has its own first
    ticket = admitted(book.issue(search, arrived=time.perf_counter(), budget_ms=60_000.0))
    time.sleep(0.2)
    ticket.finish()
    assert book.alone_ms(search) == 10.0


def test_the_time_alone_counts_from_the_admission_not_the_arrival() -> None:
    """The wait before a request was read (its arrival backdated by the loop's lag) is not its
    own work: the prediction is compared with the time left from its admission."""
    book = past_the_first(FinishAdmission(cores=1, prior_alone_ms=1.0, pace=CostModel().door))
    for _ in range(4):
        ticket = admitted(book.issue(ASK, arrived=time.perf_counter() - 5.0, budget_ms=60_000.0))
        ticket.finish()
    assert book.alone_ms(ASK) < 1_000.0  # 5 s from the arrival


def test_a_request_with_nobody_ahead_is_always_admitted() -> None:
    """Whether its budget can fit at all is the budget session's to say (504), not a 503."""
    book = FinishAdmission(cores=1, prior_alone_ms=500.0, pace=CostModel().door)
    now = time.perf_counter()
    ticket = admitted(book.issue(ASK, arrived=now, budget_ms=1.0, now=now))
    assert ticket.ahead == 0
    assert book.admitted == 1


def test_it_refuses_when_the_work_ahead_does_not_fit_and_says_when_to_retry() -> None:
    book = FinishAdmission(
        cores=1, prior_alone_ms=100.0, pace=CostModel().door
    )  # 100 ms alone, 100 ms each ahead
    now = time.perf_counter()
    for ahead in range(5):  # the 5th is due when 100 ms alone and 4 x 100 ms ahead end
        assert admitted(book.issue(ASK, arrived=now, budget_ms=500.0, now=now)).ahead == ahead
    loose = admitted(book.issue(ASK, arrived=now, budget_ms=10_000.0, now=now))
    assert loose.ahead == 5
    refused = book.issue(ASK, arrived=now, budget_ms=550.0, now=now)
    assert isinstance(refused, Refusal)
    # 100 ms alone and 100 ms for each of the 5 with an earlier deadline (not the loose one).
    assert refused.ahead == 5
    assert refused.predicted_ms == pytest.approx(600.0)
    assert refused.retry_after_s == 1
    assert "5 requests ahead" in str(refused)
    assert book.admitted == 6  # a refusal holds no place


def test_later_deadlines_are_not_ahead() -> None:
    """The stage queues serve earliest deadline first: a request due later does not delay an
    earlier one, so a tight budget behind loose ones is still admitted."""
    book = FinishAdmission(cores=1, prior_alone_ms=100.0, pace=CostModel().door)
    now = time.perf_counter()
    for _ in range(20):
        admitted(book.issue(ASK, arrived=now, budget_ms=60_000.0, now=now))
    tight = admitted(book.issue(ASK, arrived=now, budget_ms=300.0, now=now))
    assert tight.ahead == 0


def test_a_request_being_generated_is_not_ahead() -> None:
    """The generation queue is the budget session's, per target."""
    book = FinishAdmission(cores=1, prior_alone_ms=100.0, pace=CostModel().door)
    now = time.perf_counter()
    first = admitted(book.issue(ASK, arrived=now, budget_ms=10_000.0, now=now))
    second = admitted(book.issue(ASK, arrived=now, budget_ms=10_000.0, now=now))
    assert second.ahead == 1
    first.generation_started()
    third = admitted(book.issue(ASK, arrived=now, budget_ms=10_000.0, now=now))
    assert third.ahead == 1  # only the second
    first.generation_ended()
    assert book.ahead_of(now + 100.0) == 3


def test_the_generation_floor_counts_for_answers_only() -> None:
    floors = {ASK: 300.0, "/v1/search": 0.0}
    book = FinishAdmission(
        cores=1, prior_alone_ms=100.0, generation_floor_ms=floors.__getitem__, pace=CostModel().door
    )
    assert book.predicted_ms(ASK, 2) == pytest.approx(600.0)
    assert book.predicted_ms("/v1/search", 2) == pytest.approx(300.0)


def test_overlapped_requests_teach_the_work_per_request() -> None:
    """Two requests in their own work at once for at least 40 ms, then finished: the work per
    request is learned from that overlap, no longer the prior (1 ms alone, on 8 cores)."""
    book = past_the_first_burst(FinishAdmission(cores=8, prior_alone_ms=1.0, pace=CostModel().door))
    prior = book.per_request_ms()
    now = time.perf_counter()
    a = admitted(book.issue(ASK, arrived=now, budget_ms=60_000.0))
    b = admitted(book.issue(ASK, arrived=now, budget_ms=60_000.0))
    time.sleep(0.04)
    a.finish()
    b.finish()
    snapshot = book.snapshot()
    assert snapshot["overlapped_finishes"] == pytest.approx(1.0)
    # At least 40 ms of overlap for one finish, weighed 1/PRIOR_WEIGHT against the prior.
    weight = 1 / PRIOR_WEIGHT
    assert book.per_request_ms() >= weight * 39.0 + (1 - weight) * prior
    assert book.admitted == 0


def test_a_request_alone_teaches_the_time_alone_and_a_refused_one_teaches_nothing() -> None:
    book = past_the_first(FinishAdmission(cores=1, prior_alone_ms=1.0, pace=CostModel().door))
    for _ in range(4):
        ticket = admitted(book.issue(ASK, arrived=time.perf_counter(), budget_ms=60_000.0))
        time.sleep(0.02)
        ticket.finish()
    assert book.alone_ms(ASK) >= 20.0
    learned = book.alone_ms(ASK)
    cut = admitted(book.issue(ASK, arrived=time.perf_counter() - 5.0, budget_ms=60_000.0))
    cut.finish(learn=False)  # a 504 after admission: its work was cut short
    assert book.alone_ms(ASK) == learned
    assert book.admitted == 0


def test_the_time_spent_generating_is_not_its_own_work() -> None:
    book = past_the_first(FinishAdmission(cores=1, prior_alone_ms=1.0, pace=CostModel().door))
    arrived = time.perf_counter()
    ticket = admitted(book.issue(ASK, arrived=arrived, budget_ms=60_000.0))
    ticket.generation_started()
    time.sleep(0.2)
    ticket.generation_ended()
    ticket.finish()
    elapsed_ms = (time.perf_counter() - arrived) * 1000.0
    assert ticket.generation_s >= 0.2
    # One observation, weighed 1/2 against the 1 ms prior: at most the time outside generation.
    own_at_most = elapsed_ms - ticket.generation_s * 1000.0
    assert book.alone_ms(ASK) <= 0.5 * own_at_most + 0.5 * 1.0


def burst(book: FinishAdmission, size: int, *, start: float, took_s: float) -> None:
    """``size`` requests admitted together at ``start``, all finishing ``took_s`` later (a
    burst's requests leave their batched stages together)."""
    tickets = [
        admitted(book.issue(ASK, arrived=start, budget_ms=1e9, now=start)) for _ in range(size)
    ]
    for ticket in tickets:
        book.finish(ticket, now=start + took_s)


def test_a_bursts_finishes_together_teach_its_whole_time_over_its_requests() -> None:
    """Fading the overlapped time at each finish counted a fifth of a 100-request burst's time,
    and the learned figure fell burst after burst; it fades with time instead."""
    book = past_the_first_burst(FinishAdmission(cores=1, pace=CostModel().door))
    start = time.perf_counter() - 1_000.0
    burst(book, 100, start=start, took_s=2.0)
    # 2 s over the 99 finishes that had another request beside them (the last was alone).
    assert book.per_request_ms() == pytest.approx(2_000.0 / 99, rel=0.01)
    burst(book, 100, start=start + 3.0, took_s=2.0)  # the same again: the same figure
    assert book.per_request_ms() == pytest.approx(2_000.0 / 99, rel=0.01)
    assert book.snapshot()["overlapped_finishes"] == 198


def test_the_learned_work_per_request_fades_with_time_and_then_the_prior_returns() -> None:
    """It fades with time, not with each finish (above). After a quiet spell of many
    half-lives the prior stands again, as every figure of the cost model's does: a figure
    learned in a slow period cannot go on refusing bursts."""
    clock = Clock()
    book = past_the_first_burst(
        FinishAdmission(cores=1, prior_alone_ms=10.0, pace=CostModel(clock=clock).door)
    )
    start = time.perf_counter() - 1_000.0
    burst(book, 100, start=start, took_s=2.0)  # about 20 ms a request
    assert book.per_request_ms() == pytest.approx((2_000.0 + 10.0) / 100, rel=1e-3)
    clock.now += THROUGHPUT_HALF_LIFE_S  # its 99 finishes weigh half: the figure stands
    assert book.per_request_ms() == pytest.approx((1_000.0 + 10.0) / 50.5, rel=1e-3)
    clock.now += 10 * THROUGHPUT_HALF_LIFE_S  # they weigh 0.05: the prior counts as 15.95
    assert book.per_request_ms() == pytest.approx(10.0, rel=0.05)
    burst(book, 100, start=start + 500.0, took_s=0.5)  # now about 5 ms a request
    assert book.per_request_ms() == pytest.approx((500.0 + 10.0) / 100, rel=0.01)


def test_the_loops_lag_per_admitted_request_is_learned_in_bursts_and_predicted() -> None:
    """A burst's answers end together and the loop runs all their ends: once the work per
    request is learned, the lag the admitted requests will make counts in a newcomer's
    prediction, not only the lag of now."""
    book = past_the_first_burst(
        FinishAdmission(cores=1, prior_alone_ms=10.0, lag_ms=lambda: 5.0, pace=CostModel().door)
    )
    burst(book, PRIOR_WEIGHT + 1, start=time.perf_counter() - 1_000.0, took_s=0.16)
    # 160 ms over 16 overlapped finishes, beside the prior's 10 ms at the least weight
    assert book.per_request_ms() == pytest.approx(10.0, rel=1e-3)
    now = time.perf_counter()
    for _ in range(LAG_LEARN_MIN - 1):
        admitted(book.issue(ASK, arrived=now, budget_ms=150.0, now=now))
    book.observe_lag(700.0)  # too few admitted to learn from
    assert book.lag_per_request_ms() == 0.0
    assert book.expected_lag_ms() == 5.0
    admitted(book.issue(ASK, arrived=now, budget_ms=150.0, now=now))
    book.observe_lag(80.0)  # 10 ms for each of the 8 admitted
    assert book.lag_per_request_ms() == pytest.approx(10.0)
    # The 8 admitted and the newcomer: 90 ms, more than the 5 ms of now.
    assert book.expected_lag_ms() == pytest.approx(90.0)
    assert book.predicted_ms(ASK, 8) == pytest.approx(10.0 + 8 * 10.0 + 90.0, rel=1e-3)
    assert book.snapshot()["lag_per_request_ms"] == pytest.approx(10.0)
    # The same budget as the 8 ahead: it fits their work (10 + 80 ms) and the lag of now, not
    # the lag they will make.
    assert isinstance(book.issue(ASK, arrived=now, budget_ms=150.0, now=now), Refusal)


def test_the_lag_per_request_waits_for_a_learned_pace() -> None:
    """While the work per request is still the prior (the time alone over the share of the
    cores, itself cautious), the lag counted is the lag of now: the lags of a first burst's
    arrivals, over the few admitted then, made a fresh server refuse a tenth of a burst it
    answers whole."""
    book = FinishAdmission(cores=1, prior_alone_ms=10.0, lag_ms=lambda: 5.0, pace=CostModel().door)
    now = time.perf_counter()
    for _ in range(LAG_LEARN_MIN):
        admitted(book.issue(ASK, arrived=now, budget_ms=1e9, now=now))
    book.observe_lag(80.0)
    assert book.lag_per_request_ms() == pytest.approx(10.0)
    assert book.expected_lag_ms() == 5.0


def test_a_processs_first_burst_is_not_learned_from() -> None:
    """It pays one-time costs, as a process's first request alone does: after one small burst,
    its figure made fresh servers refuse a tenth or more of a burst they answer whole."""
    clock = Clock()
    book = FinishAdmission(cores=1, prior_alone_ms=10.0, pace=CostModel(clock=clock).door)
    start = time.perf_counter() - 1_000.0
    burst(book, 13, start=start, took_s=0.36)  # 30 ms a request: the first burst's
    snapshot = book.snapshot()
    assert not snapshot["first_burst"] and snapshot["overlapped_finishes"] == 0
    assert book.per_request_ms() == pytest.approx(10.0)  # still the prior
    burst(book, PRIOR_WEIGHT + 1, start=start + 10.0, took_s=0.16)  # 10 ms a request
    assert book.per_request_ms() == pytest.approx(10.0, rel=1e-3)
    clock.now += THROUGHPUT_HALF_LIFE_S
    burst(book, PRIOR_WEIGHT + 1, start=start + 20.0, took_s=0.08)
    # The second burst and the third (5 ms a request), the second faded by a half, beside the
    # prior (10 ms) at the least weight, one finish's.
    expected = (0.5 * 160.0 + 80.0 + 10.0) / (0.5 * 16 + 16 + 1)
    assert book.per_request_ms() == pytest.approx(expected, rel=1e-3)


def test_the_first_stretch_lasts_until_fewer_than_two_are_in_their_own_work() -> None:
    """Not cut short: finishes counted after a cut would bring none of a burst's time."""
    book = FinishAdmission(cores=1, prior_alone_ms=10.0, pace=CostModel().door)
    start = time.perf_counter() - 1_000.0
    held = [admitted(book.issue(ASK, arrived=start, budget_ms=1e9, now=start)) for _ in range(2)]
    at = start
    for _ in range(100):  # two or more in their own work all along
        ticket = admitted(book.issue(ASK, arrived=at, budget_ms=1e9, now=at))
        at += 0.02
        book.finish(ticket, now=at)
    assert book.snapshot()["first_burst"]
    assert book.per_request_ms() == pytest.approx(10.0)  # the prior: nothing learned yet
    for ticket in held:
        book.finish(ticket, now=at)
    snapshot = book.snapshot()
    assert not snapshot["first_burst"] and snapshot["overlapped_finishes"] == 0
    burst(book, PRIOR_WEIGHT + 1, start=at + 1.0, took_s=0.32)  # then it learns: 20 ms each
    # 320 ms over 16 finishes, beside the prior (10 ms) at the least weight, one finish's
    assert book.per_request_ms() == pytest.approx((320.0 + 10.0) / (16 + 1), rel=1e-3)
