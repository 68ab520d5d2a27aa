"""A cited passage's text is redacted as a search hit's is, and worked out once while kept: each
answer sends each passage twice (evidence, then citations), and passages come back (issue 60)."""

from __future__ import annotations

from app.http.report import redacted_passage_text
from app.safety.redaction import redact

TEXT = "Write to jane.doe@example.org or call +44 20 7946 0958 for the tutorial package."


def test_a_passage_is_redacted_once_while_kept() -> None:
    before = redacted_passage_text.cache_info()
    first = redacted_passage_text(TEXT)
    again = redacted_passage_text(TEXT)
    assert first == again == redact(TEXT)
    assert "[email redacted]" in first and "jane.doe@" not in first
    after = redacted_passage_text.cache_info()
    assert after.misses - before.misses <= 1 and after.hits - before.hits >= 1
