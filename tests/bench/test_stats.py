"""Percentiles and summaries on data whose answers are known."""

from __future__ import annotations

import pytest

from bench.harness.stats import percentiles, ratio, summarize


def test_percentiles_of_one_to_a_hundred() -> None:
    # numpy's linear method: rank (n - 1) * q between the sorted values.
    assert percentiles(list(range(1, 101))) == pytest.approx([50.5, 95.05, 99.01])


def test_percentiles_ignore_order_and_interpolate() -> None:
    assert percentiles([40.0, 10.0, 30.0, 20.0], [0, 25, 50, 100]) == [10.0, 17.5, 25.0, 40.0]


def test_percentiles_of_one_sample_are_that_sample() -> None:
    assert percentiles([7.0]) == [7.0, 7.0, 7.0]


def test_percentiles_need_samples() -> None:
    with pytest.raises(ValueError):
        percentiles([])


def test_summary_carries_its_sample_count() -> None:
    s = summarize(float(v) for v in range(1, 101))
    assert s.n == 100
    assert (s.p50, s.p95, s.p99) == pytest.approx((50.5, 95.05, 99.01))
    assert (s.mean, s.min, s.max) == (50.5, 1.0, 100.0)
    assert s.fmt("p99", 2) == "99.01"


def test_empty_summary_has_no_figures() -> None:
    s = summarize([])
    assert s.n == 0 and s.p50 is None and s.max is None
    assert s.fmt("p95") == "n/a"


def test_ratio() -> None:
    assert ratio(3.0, 2.0) == 1.5
    assert ratio(None, 2.0) is None and ratio(1.0, 0.0) is None
