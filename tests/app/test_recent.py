"""``Recent``, the bounded map behind the caches of questions and passages."""

from __future__ import annotations

import pytest

from app.stages.recent import Recent


def test_the_least_recently_used_goes_first() -> None:
    kept: Recent[str, int] = Recent(2)
    kept.put("a", 1)
    kept.put("b", 2)
    assert kept.get("a") == 1  # "a" used last: "b" is now the oldest
    kept.put("c", 3)
    assert kept.get("b") is None and kept.get("a") == 1 and kept.get("c") == 3
    assert len(kept) == 2


def test_size_zero_keeps_nothing_and_a_negative_size_is_refused() -> None:
    kept: Recent[str, int] = Recent(0)
    kept.put("a", 1)
    assert kept.get("a") is None and len(kept) == 0
    with pytest.raises(ValueError, match="size must be 0 or more"):
        Recent(-1)
