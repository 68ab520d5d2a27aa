"""The ``debian-faq`` evaluation set, built from the HTML of Debian's debian-faq package.

``make eval-data`` downloads the package (``apt-get download debian-faq``) and extracts its
``usr/share/doc/debian/FAQ`` folder to ``<data_dir>/eval/debian-faq/FAQ``; nothing is fetched
here. The FAQ is DocBook's HTML, one page per chapter (``<stem>.en.html``; the ``<stem>.html``
beside each is a link to it), each section a ``div.section`` that opens with its heading
(``h2``-``h4`` in a ``div.titlepage``). From the chapters ``build_dataset`` writes a corpus of
HTML files, which ragtime's ingest reads with its HTML parser:

* each question's answer as a file of its own (``faq-answers/answer-NNN.html``): the elements
  of the question's section up to the next question's, WITHOUT the heading (a sub-section that
  is not a question, such as 8.1.1 "dpkg" under 8.1 "What programs does Debian provide for
  managing its packages?", stays in the answer with its heading);
* the rest of each chapter (its title, its introduction, the sections that are not questions
  such as chapter 16's "Authors", its footnotes) as ``faq-pages/<stem>.html``, when it holds
  text besides the title. Nothing else: the table of contents (``index.en.html``), each
  chapter's own table of contents and the navigation bars list the questions' words and are
  left out, and so is the rest of Debian's documentation.

A question is a section heading with a ``?`` in it (123 of the 164 headings in the FAQ of
January 2021: "5.14. I have a wireless network card ...", ...); its words are the heading's,
without its number. A cross-reference (``a.xref``), which DocBook writes as its target's
number and title ("Section 6.1, “How many Debian distributions are there?”"), keeps the number
alone, so that no answer carries another question's words that its author did not write.

Licence: the Debian FAQ is © 1996-2021 Software in the Public Interest, which permits making
and distributing verbatim and modified copies under the same notice (the package's
``copyright``); it is in Debian's main archive. This set copies nothing from it into the
repository: it reads the package that ``make eval-data`` fetched.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from bs4 import BeautifulSoup, NavigableString, Tag

from retrieval.eval.faq_corpus import (
    CorpusWriter,
    Dataset,
    Heading,
    answer_spans,
    check_sample,
    kept,
    missing,
    outside,
    question_text,
)

DATASET = "debian-faq"
PACKAGE = "debian-faq"
PAGES_DIR = "faq-pages"
SUFFIX = ".html"
PAGE_SUFFIX = ".en.html"
CONTENTS_PAGE = "index.en.html"

_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_XREF_LABEL = re.compile(r"^\s*((?:Section|Chapter|Appendix)\s+[\d.A-Z]+?)\s*,")
_WRAPPER = (
    '<!DOCTYPE html>\n<html><head><meta charset="utf-8" /></head><body>\n{body}\n</body></html>\n'
)


def faq_dir(data_dir: Path) -> Path:
    """Where ``make eval-data`` puts the package's FAQ folder."""
    return Path(data_dir) / PACKAGE / "FAQ"


def require_faq(data_dir: Path) -> Path:
    """The FAQ folder, or ``EvalDataMissing`` saying which make target fetches it."""
    root = faq_dir(data_dir)
    if not (root / CONTENTS_PAGE).is_file():
        raise missing(DATASET, PACKAGE, root / CONTENTS_PAGE, "dpkg-deb -x")
    return root


def _classes(node: Tag) -> list[str]:
    value = node.get("class")
    return list(value) if isinstance(value, list) else str(value or "").split()


def _label_cross_references(chapter: Tag) -> None:
    """``Section 6.1, “title”`` -> ``Section 6.1`` in every cross-reference of ``chapter``."""
    for link in chapter.find_all("a", class_="xref"):
        label = _XREF_LABEL.match(link.get_text(" "))
        if label:
            link.string = " ".join(label[1].split())


def _parts(chapter: Tag) -> tuple[list[str], list[Heading]]:
    """The chapter flattened: its elements as HTML in document order, sections opened, and
    the headings among them (a section's heading is the part its ``div.titlepage`` was, and its
    ``close`` where the section's elements end)."""
    parts: list[str] = []
    heads: list[Heading] = []

    def walk(node: Tag) -> None:
        own: int | None = None  # the index of this section's heading in heads
        for child in node.children:
            if not isinstance(child, Tag):
                if type(child) is NavigableString and child.strip():  # not a comment
                    parts.append(str(child))
                continue
            kind = _classes(child)
            if "toc" in kind:
                continue
            if "section" in kind:
                walk(child)
                continue
            title = child.find(_HEADINGS) if "titlepage" in kind else None
            if isinstance(title, Tag):
                words = " ".join(title.get_text(" ").split())
                level = int(title.name[1]) - 1  # h1, the chapter's title, is level 0
                question = level > 0 and "?" in words
                own = len(heads) if own is None else own
                heads.append(Heading(len(parts), len(parts) + 1, level, words, question))
                parts.append(str(title))
                continue
            parts.append(str(child))
        if own is not None:
            heads[own] = replace(heads[own], close=len(parts))

    walk(chapter)
    return parts, heads


def _has_text(markup: str) -> bool:
    return bool(BeautifulSoup(markup, "html.parser").get_text().strip())


def chapter_questions(html: str) -> tuple[list[tuple[str, str]], str]:
    """``(question, answer)`` pairs of one chapter page, in order, each answer an HTML body
    without its heading; and the rest of the chapter as an HTML body ("" when it holds no text
    besides its title)."""
    soup = BeautifulSoup(html, "html.parser")
    chapter = soup.find("div", class_=("chapter", "appendix", "preface")) or soup.body
    if not isinstance(chapter, Tag):
        return [], ""
    _label_cross_references(chapter)
    parts, heads = _parts(chapter)
    spans = answer_spans(heads, len(parts))
    pairs = []
    for head, end in spans:
        answer = "\n".join(parts[head.end : end])
        if _has_text(answer):
            pairs.append((question_text(head.text), answer))
    titles = {h.start for h in heads}
    rest_parts = outside(spans, len(parts))
    rest = "\n".join(parts[i] for i in rest_parts)
    body_text = any(i not in titles and _has_text(parts[i]) for i in rest_parts)
    return pairs, rest if body_text else ""


def build_dataset(faq: Path, out_dir: Path, *, sample: float = 1.0) -> Dataset:
    """Write the corpus under ``out_dir`` (replacing what is there) and return the dataset.

    ``sample`` < 1 keeps that share of the chapters' rest pages (chosen by the hash of their
    path); every answer stays."""
    check_sample(sample)
    faq = Path(faq)
    pages = sorted(p for p in faq.glob(f"*{PAGE_SUFFIX}") if p.name != CONTENTS_PAGE)
    if not pages:
        raise missing(DATASET, PACKAGE, faq / f"*{PAGE_SUFFIX}", "dpkg-deb -x")
    corpus = CorpusWriter(out_dir)
    for page in pages:
        stem = page.name[: -len(PAGE_SUFFIX)]
        pairs, rest = chapter_questions(page.read_text("utf-8"))
        for n, (question, answer) in enumerate(pairs, start=1):
            corpus.answer(f"{stem}-{n:03d}", question, _WRAPPER.format(body=answer), SUFFIX)
        relative = f"{stem}{SUFFIX}"
        if rest and kept(relative, sample):
            corpus.document(PAGES_DIR, relative, _WRAPPER.format(body=rest).encode())
    return corpus.dataset(DATASET, sample, faq)
