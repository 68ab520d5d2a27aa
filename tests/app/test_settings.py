"""Settings fail fast on values that cannot work together."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.settings import AUTO_WORKERS_MAX, Settings


def test_environment_overrides_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGTIME_CONTEXT_TOKENS", "512")
    monkeypatch.setenv("RAGTIME_RECORD_CONTENT", "true")
    settings = Settings(_env_file=None)
    assert settings.context_tokens == 512 and settings.record_content is True


@pytest.mark.parametrize(
    ("values", "fragment"),
    [
        ({"budget_ms_default": 10, "budget_ms_min": 50}, "budget_ms_default must lie within"),
        ({"top_k": 30, "max_top_k": 20}, "top_k (30) must not exceed max_top_k (20)"),
        ({"context_tokens": 2000, "max_output_tokens": 192}, "generation_context_window"),
        ({"port": 0}, "greater than or equal to 1"),
        ({"moderation_threshold": 0}, "greater than 0"),
    ],
)
def test_bad_values_are_rejected_with_a_reason(values: dict[str, int], fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        Settings(_env_file=None, **values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({}, 1),  # the CPU default: each process would run its own llama.cpp on the same cores
        ({"generation_backend": "null"}, "cores"),
        ({"generation_backend": "null", "rate_limit_per_s": 5.0}, 1),
        (
            {
                "generation_backend": "null",
                "rate_limit_per_s": 5.0,
                "redis_url": "redis://127.0.0.1:6379/0",
            },
            "cores",
        ),
        ({"generation_backend": "null", "workers": 3}, 3),
    ],
)
def test_auto_workers_serve_with_every_core_where_more_processes_serve_more(
    monkeypatch: pytest.MonkeyPatch, values: dict[str, object], expected: int | str
) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(6)))
    settings = Settings(_env_file=None, **values)  # type: ignore[arg-type]
    assert settings.serve_workers == (AUTO_WORKERS_MAX if expected == "cores" else expected)


@pytest.mark.parametrize("value", ["0", "many", "65"])
def test_workers_is_a_count_or_auto(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("RAGTIME_WORKERS", value)
    with pytest.raises(ValidationError, match="workers"):
        Settings(_env_file=None)
