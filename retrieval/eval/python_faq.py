"""The ``python-faq`` evaluation set, built from the reST sources of Debian's python3.11-doc.

``make eval-data`` downloads the package (``apt-get download python3.11-doc``) and extracts its
``_sources`` tree under ``<data_dir>/eval/python3.11-doc/_sources``; nothing is fetched here.
From that tree ``build_dataset`` writes a corpus directory:

* every ``*.rst.txt`` file outside ``faq/``, as it is (``docs/<path>``);
* each FAQ question's answer as a file of its own (``faq-answers/answer-NNN.rst.txt``): the
  text under the question's heading up to the next heading of the same or a higher level,
  WITHOUT the heading, so that the question's own words do not trivially match it.

The questions are the FAQ headings (inline markup made plain); a question's one relevant
document is its answer file. A question is a heading at the deepest section level of its FAQ
page, or any heading below the page title that ends in ``?``; one whose answer is empty is
left out.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from retrieval.errors import RetrievalError

DATASET = "python-faq"
PACKAGE = "python3.11-doc"
MAKE_TARGET = "make eval-data"
ANSWERS_DIR = "faq-answers"
DOCS_DIR = "docs"
SUFFIX = ".rst.txt"

_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_ROLE = re.compile(r"(?::[\w.+-]+)+:`(?P<body>[^`]+)`")
_LITERAL = re.compile(r"``(?P<text>[^`]+?)``")
_LINK = re.compile(r"`(?P<text>[^`<]+?)\s*(?:<[^`>]*>)?`_{0,2}")
_TARGET = re.compile(r"\s*<[^<>]*>$")


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
    sample: float = 1.0  # the share of the non-FAQ documents kept


@dataclass(frozen=True)
class _Heading:
    line: int  # index of the title line
    start: int  # index of the first line of the heading (overline or title)
    end: int  # index of the first line after the underline
    level: int
    text: str


def sources_dir(data_dir: Path) -> Path:
    """Where ``make eval-data`` puts the ``_sources`` tree of the package."""
    return Path(data_dir) / PACKAGE / "_sources"


def require_sources(data_dir: Path) -> Path:
    """The ``_sources`` tree, or ``EvalDataMissing`` saying which make target fetches it."""
    root = sources_dir(data_dir)
    if not (root / "faq").is_dir():
        raise EvalDataMissing(
            f"the {DATASET} evaluation data is missing: no {root / 'faq'}. Fetch it once with "
            f"`{MAKE_TARGET}` (apt-get download {PACKAGE}, then dpkg-deb -x; set EVAL_DATA to "
            f"put it elsewhere and pass that folder as --data)"
        )
    return root


def _is_rule(line: str, width: int) -> bool:
    stripped = line.rstrip()
    return (
        len(stripped) >= max(width, 3)
        and stripped[0] in _PUNCTUATION
        and stripped == stripped[0] * len(stripped)
    )


def _headings(lines: list[str]) -> list[_Heading]:
    """The section titles of a reST file, with their level by order of first appearance."""
    styles: list[tuple[str, bool]] = []
    found: list[_Heading] = []
    i = 0
    while i < len(lines) - 1:
        text = lines[i].rstrip()
        if (
            text
            and not text[0].isspace()
            and not _is_rule(text, 1)
            and _is_rule(lines[i + 1], len(text))
        ):
            over = (
                i > 0 and _is_rule(lines[i - 1], len(text)) and lines[i - 1][0] == lines[i + 1][0]
            )
            style = (lines[i + 1][0], over)
            if style not in styles:
                styles.append(style)
            start = i - 1 if over else i
            found.append(_Heading(i, start, i + 2, styles.index(style), text.strip()))
            i += 2
            continue
        i += 1
    return found


def _role_text(body: str) -> str:
    """What Sphinx shows for a role's body: a title before ``<target>``, ``~a.b`` as ``b``."""
    body = _TARGET.sub("", body).lstrip("!")
    return body[1:].rsplit(".", 1)[-1] if body.startswith("~") else body


def plain(text: str) -> str:
    """A heading's words as a reader sees them: roles, literals and links made plain."""
    text = _ROLE.sub(lambda m: _role_text(m["body"]), text)
    text = _LITERAL.sub(lambda m: m["text"], text)
    text = _LINK.sub(lambda m: m["text"], text)
    return " ".join(text.replace("\\", "").split())


def faq_questions(text: str) -> list[tuple[str, str]]:
    """``(question, answer)`` pairs of one FAQ page, in order; the answer is raw reST."""
    lines = text.replace("\r\n", "\n").split("\n")
    heads = _headings(lines)
    if not heads:
        return []
    deepest = max(h.level for h in heads)
    pairs: list[tuple[str, str]] = []
    for n, head in enumerate(heads):
        if head.level == 0 or not (head.level == deepest or head.text.endswith("?")):
            continue
        end = next((h.start for h in heads[n + 1 :] if h.level <= head.level), len(lines))
        answer = "\n".join(lines[head.end : end]).strip("\n")
        if answer.strip():
            pairs.append((plain(head.text), answer + "\n"))
    return pairs


def _kept(relative: str, sample: float) -> bool:
    """Whether a document is in a ``sample`` of the corpus: fixed by its path's hash."""
    if sample >= 1.0:
        return True
    return int(hashlib.sha1(relative.encode()).hexdigest()[:8], 16) < sample * 0x1_0000_0000


def build_dataset(sources: Path, out_dir: Path, *, sample: float = 1.0) -> Dataset:
    """Write the corpus under ``out_dir`` (replacing what is there) and return the dataset.

    ``sample`` < 1 keeps that share of the documents other than the answers (the same ones
    every time: chosen by the hash of their path), for a quicker, easier run; every answer
    stays."""
    if not 0.0 < sample <= 1.0:
        raise ValueError(f"sample must be in (0, 1], got {sample}")
    sources, out_dir = Path(sources), Path(out_dir)
    faq_pages = sorted((sources / "faq").glob(f"*{SUFFIX}"))
    if not faq_pages:
        raise EvalDataMissing(f"no FAQ pages (*{SUFFIX}) in {sources / 'faq'}: run {MAKE_TARGET}")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    digest = hashlib.sha256()
    documents = 0
    for file in sorted(sources.rglob(f"*{SUFFIX}")):
        relative = file.relative_to(sources)
        if relative.parts[0] == "faq" or not _kept(relative.as_posix(), sample):
            continue
        target = out_dir / DOCS_DIR / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        data = file.read_bytes()
        target.write_bytes(data)
        digest.update(relative.as_posix().encode() + b"\0" + hashlib.sha256(data).digest())
        documents += 1
    answers = out_dir / ANSWERS_DIR
    answers.mkdir(parents=True, exist_ok=True)
    questions: list[Question] = []
    for page in faq_pages:
        stem = page.name[: -len(SUFFIX)]
        for n, (question, answer) in enumerate(faq_questions(page.read_text("utf-8")), start=1):
            source = f"{ANSWERS_DIR}/answer-{len(questions) + 1:03d}{SUFFIX}"
            (out_dir / source).write_text(answer, encoding="utf-8")
            questions.append(Question(f"{stem}-{n:03d}", question, source))
            digest.update(f"{source}\0{question}\0{answer}".encode())
            documents += 1
    if not questions:
        raise EvalDataMissing(f"no questions found in the FAQ pages under {sources / 'faq'}")
    return Dataset(DATASET, out_dir, questions, documents, digest.hexdigest()[:16], sample)
