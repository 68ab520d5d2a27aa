"""How one request fared against its budget: useful, within budget, refused.

The goodput bench (``ragtime bench budget --budgets``), the fresh-process bench and the burst
bench judge their requests alike, by these.
"""

from __future__ import annotations

from bench.harness.client import RequestRecord

#: A useful answer has at least this many words.
USEFUL_WORDS = 3


def is_useful(record: RequestRecord) -> bool:
    """A complete answer of at least a few words, within its budget."""
    return (
        record.outcome == "ok"
        and record.status == 200
        and is_within(record)
        and record.answer_words >= USEFUL_WORDS
    )


def is_within(record: RequestRecord) -> bool:
    """The response, an answer or a 504, came back within the budget (the budget held)."""
    if record.e2e_ms is None:
        return False
    late = record.budget_ms is not None and record.e2e_ms > record.budget_ms
    if record.outcome == "ok" and record.status == 200:
        return not (record.budget_exceeded or late)
    return is_refused(record) and not late


def is_refused(record: RequestRecord) -> bool:
    return record.status == 504 or "deadline_exceeded" in (record.error or "")
