"""``ragtime bench safety``'s measurement: the passage screen (``app/safety/injection.py``) and the
redaction (``app/safety/redaction.py``) scored on the labelled sets of ``labelled_sets`` and on the
demo corpus (all clean), with the time each check takes per passage."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from app.safety.injection import screen
from app.safety.redaction import KINDS, redact
from bench.harness.paths import DEMO_CORPUS
from bench.suites.safety.labelled_sets import (
    CLEAN,
    HELD_OUT_CLEAN,
    HELD_OUT_HOSTILE,
    HELD_OUT_PII,
    HOSTILE,
    PII,
    ROUND2_CLEAN,
    ROUND2_HOSTILE,
    ROUND2_PII,
)


@dataclass
class Scores:
    """True and false positives and false negatives, with precision and recall."""

    tp: int = 0
    fp: int = 0
    fn: int = 0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0


@dataclass
class SafetyResult:
    injection: Scores
    corpus_passages: int
    corpus_flagged: list[str]
    screen_ms_per_passage: float
    pii: Scores
    pii_by_kind: dict[str, Scores] = field(default_factory=dict)
    held_out_injection: Scores = field(default_factory=Scores)
    held_out_pii: Scores = field(default_factory=Scores)
    corpus_redactions: dict[str, int] = field(default_factory=dict)
    redact_ms_per_passage: float = 0.0


def corpus_passages(path: Path = DEMO_CORPUS) -> list[str]:
    """The demo corpus's chunks, as ingest makes them."""
    from retrieval import chunk_text, iter_documents

    return [
        chunk.text
        for file in iter_documents(path)
        for chunk in chunk_text(file.read_text(encoding="utf-8"), file.name)
    ]


def score_injection(hostile: list[str], clean: list[str]) -> Scores:
    scores = Scores()
    for text in hostile:
        if screen(text).quarantine:
            scores.tp += 1
        else:
            scores.fn += 1
    scores.fp = sum(screen(text).quarantine for text in clean)
    return scores


def score_pii(samples: list[tuple[str, dict[str, int]]]) -> dict[str, Scores]:
    by_kind = {kind: Scores() for kind in KINDS}
    for text, expected in samples:
        found: Counter[str] = Counter()
        redact(text, found)
        for kind in KINDS:
            hit = min(found[kind], expected.get(kind, 0))
            by_kind[kind].tp += hit
            by_kind[kind].fp += found[kind] - hit
            by_kind[kind].fn += expected.get(kind, 0) - hit
    return by_kind


def _total(by_kind: dict[str, Scores]) -> Scores:
    return Scores(*(sum(getattr(s, f) for s in by_kind.values()) for f in ("tp", "fp", "fn")))


def measure(corpus: Path = DEMO_CORPUS) -> SafetyResult:
    passages = corpus_passages(corpus)
    started = time.perf_counter()
    flagged = [text[:80] for text in passages if screen(text).quarantine]
    screen_ms = (time.perf_counter() - started) * 1000.0 / max(len(passages), 1)
    injection = score_injection(HOSTILE + ROUND2_HOSTILE, CLEAN + ROUND2_CLEAN)
    injection.fp += len(flagged)  # the demo corpus, all clean, screened once above
    redactions: Counter[str] = Counter()
    started = time.perf_counter()
    for text in passages:
        redact(text, redactions)
    redact_ms = (time.perf_counter() - started) * 1000.0 / max(len(passages), 1)
    by_kind = score_pii(PII + ROUND2_PII)
    return SafetyResult(
        injection=injection,
        corpus_passages=len(passages),
        corpus_flagged=flagged,
        screen_ms_per_passage=screen_ms,
        pii=_total(by_kind),
        pii_by_kind=by_kind,
        held_out_injection=score_injection(HELD_OUT_HOSTILE, HELD_OUT_CLEAN),
        held_out_pii=_total(score_pii(HELD_OUT_PII)),
        corpus_redactions=dict(redactions),
        redact_ms_per_passage=redact_ms,
    )


def table(result: SafetyResult) -> str:
    inj = result.injection
    lines = [
        f"injection screen: {len(HOSTILE) + len(ROUND2_HOSTILE)} hostile, "
        f"{len(CLEAN) + len(ROUND2_CLEAN)} clean passages and "
        f"{result.corpus_passages} of the demo corpus (all clean)",
        f"  precision {inj.precision:.3f}  recall {inj.recall:.3f}  "
        f"(tp {inj.tp}, fp {inj.fp}, fn {inj.fn})",
        f"  demo corpus flagged: {len(result.corpus_flagged)} of {result.corpus_passages}",
        f"  {result.screen_ms_per_passage:.3f} ms per passage (demo corpus)",
        f"PII redaction: {len(PII) + len(ROUND2_PII)} labelled texts",
        f"  all kinds: precision {result.pii.precision:.3f}  recall {result.pii.recall:.3f}  "
        f"(tp {result.pii.tp}, fp {result.pii.fp}, fn {result.pii.fn})",
    ]
    for kind, s in result.pii_by_kind.items():
        lines.append(
            f"  {kind:<12} precision {s.precision:.3f}  recall {s.recall:.3f}  "
            f"(tp {s.tp}, fp {s.fp}, fn {s.fn})"
        )
    lines.append(f"  demo corpus redactions: {result.corpus_redactions or 'none'}")
    lines.append(f"  {result.redact_ms_per_passage:.3f} ms per passage (demo corpus)")
    held_inj, held_pii = result.held_out_injection, result.held_out_pii  # the honest figures
    lines += [
        f"held out (written after tuning, never tuned on): {len(HELD_OUT_HOSTILE)} hostile and "
        f"{len(HELD_OUT_CLEAN)} clean passages, {len(HELD_OUT_PII)} PII texts",
        f"  injection: precision {held_inj.precision:.3f}  recall {held_inj.recall:.3f}  "
        f"(tp {held_inj.tp}, fp {held_inj.fp}, fn {held_inj.fn})",
        f"  PII:       precision {held_pii.precision:.3f}  recall {held_pii.recall:.3f}  "
        f"(tp {held_pii.tp}, fp {held_pii.fp}, fn {held_pii.fn})",
    ]
    return "\n".join(lines)
