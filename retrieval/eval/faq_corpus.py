"""What the FAQ evaluation sets share: their data types, the cut of a FAQ into questions and
answers, and the writing of a set's corpus.

Every FAQ set (``python-faq``, ``debian-faq``, ``emacs-faq``) is built the same way: the
questions are a FAQ's question headings, each question's answer (the text under its heading,
WITHOUT the heading) becomes a document of its own, and a question's one relevant document is
its answer. Each set reads its own format into a list of parts (lines, HTML elements, info
nodes) with the ``Heading``s among them; ``answer_spans`` says where each answer ends, and
``CorpusWriter`` writes the files and keeps the fingerprint that tells the runner when its
kept store is stale. The data comes from Debian packages that ``make eval-data`` fetches at
set-up; nothing is fetched here, and missing data is ``EvalDataMissing`` (``missing``) naming
that target.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from retrieval.errors import RetrievalError

MAKE_TARGET = "make eval-data"
ANSWERS_DIR = "faq-answers"

_NUMBER = re.compile(r"^\s*(?:\d+\.)*\d+\.?\s+(?=\S)")


class EvalDataMissing(RetrievalError):
    """The evaluation data has not been fetched: the message names the make target."""

    status_code = 400


@dataclass(frozen=True)
class Question:
    id: str  # "programming-012": its FAQ page and number there
    text: str
    answer_source: str  # the relevant document, relative to the corpus directory
    relevant: tuple[str, ...] = ()  # all the relevant documents, when more than the one


@dataclass(frozen=True)
class Dataset:
    name: str
    corpus_dir: Path
    questions: list[Question]
    documents: int  # files in the corpus
    fingerprint: str  # changes when the questions or any corpus file changes
    sample: float = 1.0  # the share of the documents other than the answers kept


@dataclass(frozen=True)
class Heading:
    """A section heading among a FAQ's parts (lines, elements or nodes, by the format)."""

    start: int  # index of the heading's first part
    end: int  # index of the first part after the heading: where its text begins
    level: int  # 0 for the page's title, larger for deeper sections
    text: str  # the heading's words as a reader sees them
    question: bool  # whether the heading is one of the FAQ's questions
    close: int | None = None  # where its section ends, where the format marks it (HTML's div)


def missing(dataset: str, package: str, expected: Path, how: str) -> EvalDataMissing:
    """The error for a set whose data is not where ``make eval-data`` puts it."""
    return EvalDataMissing(
        f"the {dataset} evaluation data is missing: no {expected}. Fetch it once with "
        f"`{MAKE_TARGET}` (apt-get download {package}, then {how}; set EVAL_DATA to put it "
        f"elsewhere and pass that folder as --data)"
    )


def is_entry(level: int, deepest: int, text: str) -> bool:
    """A FAQ entry by the rule of FAQs whose every deepest section is one: below the page's
    title, and at the deepest level or ending in ``?``."""
    return level > 0 and (level == deepest or text.endswith("?"))


def question_text(heading: str) -> str:
    """A heading's words as someone would ask them: its section number (``3.1.2.``, ``5.43``)
    dropped and its whitespace made single spaces."""
    return " ".join(_NUMBER.sub("", heading).split())


def answer_spans(heads: list[Heading], parts: int) -> list[tuple[Heading, int]]:
    """Each question heading with the index where its answer ends: the next heading that is a
    question or of the same or a higher level (a smaller ``level``), else the end of its section
    (``close``) or of the parts. A heading below it that is not a question stays in its answer
    with its text."""
    spans = []
    for n, head in enumerate(heads):
        if head.question:
            last = parts if head.close is None else head.close
            end = next(
                (h.start for h in heads[n + 1 :] if h.question or h.level <= head.level), last
            )
            spans.append((head, min(end, last)))
    return spans


def outside(spans: list[tuple[Heading, int]], parts: int) -> list[int]:
    """The indexes of the parts that are neither a question's heading nor in its answer."""
    covered: set[int] = set()
    for head, end in spans:
        covered.update(range(head.start, end))
    return [i for i in range(parts) if i not in covered]


def kept(relative: str, sample: float) -> bool:
    """Whether a document is in a ``sample`` of the corpus: fixed by its path's hash."""
    if sample >= 1.0:
        return True
    return int(hashlib.sha1(relative.encode()).hexdigest()[:8], 16) < sample * 0x1_0000_0000


def check_sample(sample: float) -> None:
    if not 0.0 < sample <= 1.0:
        raise ValueError(f"sample must be in (0, 1], got {sample}")


class CorpusWriter:
    """Writes one set's corpus under ``out_dir`` (replacing what is there): the documents
    other than the answers, and one file per answer, ``faq-answers/answer-NNN<suffix>``."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = Path(out_dir)
        if self.out_dir.exists():
            shutil.rmtree(self.out_dir)
        self.out_dir.mkdir(parents=True)
        self.questions: list[Question] = []
        self.documents = 0
        self._digest = hashlib.sha256()

    def document(self, folder: str, relative: str, data: bytes) -> None:
        """Write ``data`` as ``<folder>/<relative>``."""
        target = self.out_dir / folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        self._digest.update(relative.encode() + b"\0" + hashlib.sha256(data).digest())
        self.documents += 1

    def answer(self, question_id: str, question: str, answer: str, suffix: str) -> None:
        """Write ``answer`` as the next answer file, the one relevant document of ``question``."""
        source = f"{ANSWERS_DIR}/answer-{len(self.questions) + 1:03d}{suffix}"
        (self.out_dir / ANSWERS_DIR).mkdir(exist_ok=True)
        (self.out_dir / source).write_text(answer, encoding="utf-8")
        self.questions.append(Question(question_id, question, source))
        self._digest.update(f"{source}\0{question}\0{answer}".encode())
        self.documents += 1

    def dataset(self, name: str, sample: float, where: Path) -> Dataset:
        """The set written; ``EvalDataMissing`` when ``where`` gave no question."""
        if not self.questions:
            raise EvalDataMissing(f"no questions found in the FAQ pages under {where}")
        fingerprint = self._digest.hexdigest()[:16]
        return Dataset(name, self.out_dir, self.questions, self.documents, fingerprint, sample)
