"""The ``python-faq`` evaluation set, built from the reST sources of Debian's python3.11-doc.

``make eval-data`` downloads the package (``apt-get download python3.11-doc``) and extracts its
``_sources`` tree under ``<data_dir>/eval/python3.11-doc/_sources``; nothing is fetched here.
From that tree ``build_dataset`` writes a corpus directory:

* every ``*.rst.txt`` file outside ``faq/``, as it is (``docs/<path>``);
* each FAQ question's answer as a file of its own (``faq-answers/answer-NNN.rst.txt``): the
  text under the question's heading up to the next question or heading of the same or a
  higher level, WITHOUT the heading, so that the question's own words do not trivially match
  it.

The questions are the FAQ headings (inline markup made plain); a question's one relevant
document is its answer file. A question is a heading at the deepest section level of its FAQ
page, or any heading below the page title that ends in ``?``; one whose answer is empty is
left out. The cut and the corpus's writing are ``faq_corpus``'s, shared with the other FAQ
sets.
"""

from __future__ import annotations

import re
from pathlib import Path

from retrieval.eval.faq_corpus import (
    ANSWERS_DIR,
    MAKE_TARGET,
    CorpusWriter,
    Dataset,
    EvalDataMissing,
    Heading,
    Question,
    answer_spans,
    check_sample,
    is_entry,
    kept,
    missing,
)

__all__ = ["ANSWERS_DIR", "Dataset", "EvalDataMissing", "Question", "build_dataset"]

DATASET = "python-faq"
PACKAGE = "python3.11-doc"
DOCS_DIR = "docs"
SUFFIX = ".rst.txt"

_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_ROLE = re.compile(r"(?::[\w.+-]+)+:`(?P<body>[^`]+)`")
_LITERAL = re.compile(r"``(?P<text>[^`]+?)``")
_LINK = re.compile(r"`(?P<text>[^`<]+?)\s*(?:<[^`>]*>)?`_{0,2}")
_TARGET = re.compile(r"\s*<[^<>]*>$")


def sources_dir(data_dir: Path) -> Path:
    """Where ``make eval-data`` puts the ``_sources`` tree of the package."""
    return Path(data_dir) / PACKAGE / "_sources"


def require_sources(data_dir: Path) -> Path:
    """The ``_sources`` tree, or ``EvalDataMissing`` saying which make target fetches it."""
    root = sources_dir(data_dir)
    if not (root / "faq").is_dir():
        raise missing(DATASET, PACKAGE, root / "faq", "dpkg-deb -x")
    return root


def _is_rule(line: str, width: int) -> bool:
    stripped = line.rstrip()
    return (
        len(stripped) >= max(width, 3)
        and stripped[0] in _PUNCTUATION
        and stripped == stripped[0] * len(stripped)
    )


def _headings(lines: list[str]) -> list[Heading]:
    """The section titles of a reST file, with their level by order of first appearance; the
    questions among them by ``is_entry``."""
    styles: list[tuple[str, bool]] = []
    found: list[tuple[int, int, int, str]] = []
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
            found.append((i - 1 if over else i, i + 2, styles.index(style), text.strip()))
            i += 2
            continue
        i += 1
    deepest = max((level for _, _, level, _ in found), default=0)
    return [
        Heading(start, end, level, text, is_entry(level, deepest, text))
        for start, end, level, text in found
    ]


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
    pairs: list[tuple[str, str]] = []
    for head, end in answer_spans(_headings(lines), len(lines)):
        answer = "\n".join(lines[head.end : end]).strip("\n")
        if answer.strip():
            pairs.append((plain(head.text), answer + "\n"))
    return pairs


def build_dataset(sources: Path, out_dir: Path, *, sample: float = 1.0) -> Dataset:
    """Write the corpus under ``out_dir`` (replacing what is there) and return the dataset.

    ``sample`` < 1 keeps that share of the documents other than the answers (the same ones
    every time: chosen by the hash of their path), for a quicker, easier run; every answer
    stays."""
    check_sample(sample)
    sources = Path(sources)
    faq_pages = sorted((sources / "faq").glob(f"*{SUFFIX}"))
    if not faq_pages:
        raise EvalDataMissing(f"no FAQ pages (*{SUFFIX}) in {sources / 'faq'}: run {MAKE_TARGET}")
    corpus = CorpusWriter(out_dir)
    for file in sorted(sources.rglob(f"*{SUFFIX}")):
        relative = file.relative_to(sources).as_posix()
        if not relative.startswith("faq/") and kept(relative, sample):
            corpus.document(DOCS_DIR, relative, file.read_bytes())
    for page in faq_pages:
        stem = page.name[: -len(SUFFIX)]
        for n, (question, answer) in enumerate(faq_questions(page.read_text("utf-8")), start=1):
            corpus.answer(f"{stem}-{n:03d}", question, answer, SUFFIX)
    return corpus.dataset(DATASET, sample, sources / "faq")
