"""What ``ragtime ask`` prints of an answer: its tokens, the passages' answer when ``auto``
replaced the model's, and one trust line in docs/answers.md's words (who wrote it, whether the
passages bear it out, how its citations were found)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from app.cli.ask import REPLACED, _print_stream, trust_line


def report(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "citations": [
            {"label": 1, "source": "a.md", "section": "A", "title": "", "by": None},
            {"label": 2, "source": "b.md", "section": "B", "title": "", "by": None},
        ],
        "answer_mode": "generate",
        "grounded": True,
        "attribution": "model",
        "trace_id": "0" * 32,
        "budget": {"spent_ms": 10.0, "budget_ms": 100.0},
        "timings_ms": {},
    }
    return base | fields


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({}, "written by: generate  supported by the passages  cited by the model (*)"),
        (
            {"grounded": False, "attribution": "unattributed"},
            "written by: generate  UNSUPPORTED: the passages do not bear it out  no passage "
            "supports any sentence",
        ),
        (
            {"answer_mode": "extract", "attribution": "extracted"},
            "written by: extract  supported by the passages  quoted from the passages (>)",
        ),
        (
            {"answer_mode": "abstain", "grounded": False, "attribution": "abstained"},
            "written by: abstain  the documents do not answer this  nothing cited",
        ),
        (
            {"grounded": None, "attribution": "skipped"},
            "written by: generate  support not judged  citations not attributed: no time left",
        ),
    ],
)
def test_the_trust_line_says_each_signal_in_words(fields: dict[str, Any], said: str) -> None:
    assert trust_line(report(**fields)) == said


class Stream:
    """A streamed ``/v1/ask`` response, as httpx hands ``ragtime ask`` its lines."""

    status_code = 200

    def __init__(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        self.events = events

    def iter_lines(self) -> Iterator[str]:
        for name, data in self.events:
            yield f"event: {name}"
            yield f"data: {json.dumps(data)}"
            yield ""


def test_a_replaced_answer_is_printed_after_what_was_streamed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    done = report(answer_mode="extract", attribution="extracted")
    done["citations"][1]["by"] = "extracted"
    stream = Stream(
        [
            ("token", {"text": "Paris is"}),
            ("token", {"text": " in France."}),
            ("replace", {"text": "Lists hold items. [2]"}),
            ("done", done),
        ]
    )
    assert _print_stream(stream) == 0
    out = capsys.readouterr().out
    assert out.index("Paris is in France.") < out.index(REPLACED) < out.index("Lists hold items.")
    assert ">[2] b.md — B" in out and " [1] a.md — A" in out
    assert "written by: extract" in out
