"""A labelled set of answers for ``grounded`` (``app.stages.grounding``), built from the answer
set ``demo/answers`` and the demo corpus, and the sweep of its share.

Each answerable question is given its labelled passages (the text of each labelled section,
read as ingest reads it, cut to ``PASSAGE_CHARS``), and five answers:

* ``correct``: the question's reference answer (one or two sentences, as the docs give it):
  grounded;
* ``short``: the first phrasing of its first key fact that a passage holds in words, alone, as a
  short extractive answer ("immutable."): grounded;
* ``wrong``: the reference answer of a question about other files: not grounded;
* ``echo``: the question said back as a statement: not grounded;
* ``refusal``: "I don't know." or "The passages do not say.": not grounded.

``ragtime bench attribution --grounding`` prints the precision and recall of ``grounded:
true`` at each share, and the shipped one. Questions with an even index make the development
half, odd ones the tests' half (``tests/app/stages/test_grounding.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache

from app.evaluation.dataset import DEMO, Case, load_dataset
from app.stages.grounding import GROUNDED_SHARE, judge, terms
from retrieval.formats.markup import parse_markup

PASSAGE_CHARS = 1500
SHARES = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


@dataclass(frozen=True)
class LabelledAnswer:
    kind: str
    question: str
    answer: str
    passages: tuple[str, ...]
    grounded: bool


@cache
def _sections(source: str) -> dict[str, str]:
    """A corpus file's text by each heading on its path, as ingest reads it."""
    document = parse_markup((DEMO / "corpus" / source).read_text(), "rst")
    texts: dict[str, list[str]] = {}
    for block in document.blocks:
        for heading in block.path or ("",):
            texts.setdefault(heading, []).append(block.text)
    return {heading: "\n".join(parts) for heading, parts in texts.items()}


def _passages(case: Case) -> tuple[str, ...]:
    found = []
    for label in case.sources:
        text = _sections(label.source).get(label.section, "")
        if text:
            found.append(text[:PASSAGE_CHARS])
    return tuple(found)


def _short(case: Case, passages: Sequence[str]) -> str | None:
    """The first fact phrasing, in words, that a passage holds and the question does not."""
    held = " ".join(passages).lower()
    asked = terms(case.question)
    for phrasing in case.facts[0]:
        plain = phrasing.strip()
        in_words = plain.replace(" ", "").isalnum() and plain.lower() in held
        if in_words and terms(plain) - asked:  # it says something the question does not
            return plain[0].upper() + plain[1:] + "."
    return None


def _echo(question: str) -> str:
    text = question.strip().rstrip("?").strip()
    return f"You are asking: {text[0].lower() + text[1:]}. That is how."


def labelled_answers(half: int | None = None) -> list[LabelledAnswer]:
    """The labelled answers of ``demo/answers``'s answerable questions (``half`` 0 or 1: the
    even or odd ones only)."""
    cases = [c for c in load_dataset("python-docs").cases if c.kind == "answerable"]
    out: list[LabelledAnswer] = []
    for index, case in enumerate(cases):
        if half is not None and index % 2 != half:
            continue
        passages = _passages(case)
        if not passages:
            continue
        files = {label.source for label in case.sources}
        other = next(
            c
            for c in cases[index + 1 :] + cases[:index]
            if not files & {label.source for label in c.sources}
        )
        q = case.question
        out.append(LabelledAnswer("correct", q, case.reference, passages, True))
        short = _short(case, passages)
        if short is not None:
            out.append(LabelledAnswer("short", q, short, passages, True))
        out.append(LabelledAnswer("wrong", q, other.reference, passages, False))
        out.append(LabelledAnswer("echo", q, _echo(q), passages, False))
        refusal = "I don't know." if index % 2 else "The passages do not say."
        out.append(LabelledAnswer("refusal", q, refusal, passages, False))
    return out


def scores(answers: Sequence[LabelledAnswer], share: float) -> tuple[float, float]:
    """Precision and recall of ``grounded: true`` at ``share``."""
    said = [judge(a.question, a.answer, a.passages).share_at(share) for a in answers]
    true_pos = sum(s and a.grounded for s, a in zip(said, answers, strict=True))
    precision = true_pos / max(sum(said), 1)
    recall = true_pos / max(sum(a.grounded for a in answers), 1)
    return precision, recall


def sweep_rows() -> Iterator[str]:
    halves = {"development": labelled_answers(0), "tests": labelled_answers(1)}
    yield "| share | " + " | ".join(f"{n} precision | {n} recall" for n in halves) + " |"
    yield "| --- |" + " --- | --- |" * len(halves)
    for share in SHARES:
        cells = []
        for answers in halves.values():
            precision, recall = scores(answers, share)
            cells.append(f"{precision:.3f} | {recall:.3f}")
        mark = " (shipped)" if share == GROUNDED_SHARE else ""
        yield f"| {share}{mark} | " + " | ".join(cells) + " |"
    for name, answers in halves.items():
        kinds = sorted({a.kind for a in answers})
        counts = ", ".join(f"{k} {sum(a.kind == k for a in answers)}" for k in kinds)
        yield f"\n{name}: {len(answers)} answers ({counts})"
