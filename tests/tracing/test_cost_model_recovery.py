"""The cost model recovers once the machine does (issue 43 §2): after a slow period (a burst of
other load), a few observations at the quiet machine's speed bring its estimates back to what a
quiet model reads, instead of minutes of pessimistic plans; a server with two speeds (a queueing
engine's batches) and a noisy steady machine forget nothing."""

from __future__ import annotations

import random

import pytest

from tracing.budget import CostModel, GenerationPrior, Learning
from tracing.budget.observations import SPEED_UP_RUN, Samples

PRIOR = GenerationPrior(fixed_ms=60.0, prefill_ms_per_token=2.5, decode_ms_per_token=12.0)


def model() -> CostModel:
    return CostModel({"embed": 15.0}, PRIOR, learning=Learning(), clock=lambda: 0.0)


def quiet_then_loaded(cost: CostModel) -> None:
    """40 requests on the quiet machine, then a minute of load: 40 at ten times the cost."""
    gen = cost.generation("t")
    for slow in (1, 10):
        for _ in range(40):
            gen.observe_first_token(400, slow * (60.0 + 2.5 * 400))
            gen.observe_decode(100, slow * 100 * 12.0)
            cost.observe("embed", slow * 2.0, 1)
            cost.observe("assemble", slow * 4.0, 1)


def quiet_again(cost: CostModel, requests: int) -> None:
    gen = cost.generation("t")
    for _ in range(requests):
        gen.observe_first_token(400, 60.0 + 2.5 * 400)
        gen.observe_decode(100, 100 * 12.0)
        cost.observe("embed", 2.0, 1)
        cost.observe("assemble", 4.0, 1)


def test_a_few_quiet_requests_after_a_slow_period_plan_as_a_quiet_machine() -> None:
    quiet = model()
    quiet_again(quiet, 40)
    recovered = model()
    quiet_then_loaded(recovered)
    gen, quiet_gen = recovered.generation("t"), quiet.generation("t")
    assert gen.decode_ms_per_token() > 100.0  # the load was learned
    quiet_again(recovered, SPEED_UP_RUN)
    assert gen.decode_ms_per_token() == pytest.approx(quiet_gen.decode_ms_per_token(), rel=0.1)
    assert gen.ttft_ms(400) == pytest.approx(quiet_gen.ttft_ms(400), rel=0.1)
    assert recovered.rate("assemble") == pytest.approx(quiet.rate("assemble"))
    assert recovered.rate("embed") == pytest.approx(quiet.rate("embed"))


def test_a_short_burst_after_a_long_quiet_period_is_forgotten_as_it_ends() -> None:
    """A minute of load on a slow CPU is a handful of requests beside many quiet ones: its few
    slow observations set the tail for 20 requests unless they are forgotten."""
    quiet, cost = model(), model()
    quiet_again(quiet, 40)
    quiet_again(cost, 40)
    gen = cost.generation("t")
    for _ in range(5):
        gen.observe_decode(100, 100 * 60.0)
    assert gen.decode_ms_per_token() == pytest.approx(60.0)
    quiet_again(cost, SPEED_UP_RUN)
    assert gen.decode_ms_per_token() == pytest.approx(quiet.generation("t").decode_ms_per_token())


def test_fewer_quiet_requests_than_the_run_forget_nothing() -> None:
    cost = model()
    quiet_then_loaded(cost)
    quiet_again(cost, SPEED_UP_RUN - 1)
    assert cost.generation("t").decode_ms_per_token() > 100.0


def test_a_two_speed_engine_forgets_nothing() -> None:
    """A queueing engine: decode at 10 or 25 ms a token, as its batch fills and empties; runs
    of fast requests are part of its normal, and the tail must stay the slow speed."""
    rng = random.Random(7)
    samples = Samples(Learning(), lambda: 0.0, recovers=True)
    for _ in range(500):
        samples.add(1.0, rng.choice((10.0, 25.0)))
    assert samples.speed_ups == 0
    for _ in range(5):
        samples.add(1.0, 10.0)
    assert samples.speed_ups == 0 and len(samples.points) == Learning().window


def test_a_noisy_steady_machine_forgets_nothing() -> None:
    rng = random.Random(3)
    samples = Samples(Learning(), lambda: 0.0, recovers=True)
    for _ in range(2000):
        samples.add(1.0, 12.0 * rng.lognormvariate(0.0, 0.3))
    assert samples.speed_ups == 0


def test_samples_that_hold_no_rates_never_forget() -> None:
    samples = Samples(Learning(), lambda: 0.0)  # TTFT points: a line, not a rate
    for y in [1000.0] * 40 + [10.0] * 10:
        samples.add(1.0, y)
    assert samples.speed_ups == 0 and len(samples.points) == 50


@pytest.mark.parametrize(
    "ending",
    [
        [40.0, 25.0],  # the last request of the load finished after it stopped
        [40.0, 22.0, 20.0],  # the machine sped up over three requests
    ],
)
def test_a_slow_period_that_ends_gradually_is_forgotten(ending: list[float]) -> None:
    samples = Samples(Learning(), lambda: 0.0, recovers=True)
    rng = random.Random(5)
    quiet = [15.0 + 3.0 * rng.random() for _ in range(20)]
    for y in [*quiet, 60.0, 62.0, 58.0, *ending, 15.0, 16.0, 14.0, 15.0, 15.0]:
        samples.add(1.0, y)
    assert samples.speed_ups == 1
    assert max(p[1] for p in samples.points) <= 25.0
