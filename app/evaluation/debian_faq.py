"""The documents of the ``debian-faq`` answer set: the Debian FAQ's chapters, one HTML file
each, written from the package that ``make eval-data`` fetched.

The repository holds the set's questions and facts only (``demo/answers/debian-faq.jsonl``):
the FAQ (© Software in the Public Interest, copied only under its own permission notice) is
read where ``make eval-data`` put it, ``<data_dir>/eval/debian-faq/FAQ``. Its chapters are cut
into questions and answers by the retrieval evaluation's reader
(``retrieval.eval.debian_faq.chapter_questions``: navigation, tables of contents and the titles
in cross-references left out), and each chapter is written back, all its text, to
``<stem>.html``: first the chapter's title and what is not a question's answer (introduction,
sections that are not questions, footnotes), then each question as an ``h2`` heading, in its
words without its number ("How can I tell which package owns a file?"), over its answer. A
chunk of an answer is thus named by its question (its ``section``), as the set's labels are.
"""

from __future__ import annotations

import html
import shutil
from pathlib import Path

from bs4 import BeautifulSoup, Tag

from retrieval.eval.debian_faq import CONTENTS_PAGE, PAGE_SUFFIX, chapter_questions, faq_dir
from retrieval.eval.faq_corpus import MAKE_TARGET, EvalDataMissing

#: Where the documents are written, under the data dir.
CORPUS_DIR = Path("eval") / "debian-faq-answers-corpus"

_PAGE = (
    '<!DOCTYPE html>\n<html><head><meta charset="utf-8" /></head><body>\n{body}\n</body></html>\n'
)


def chapter_page(chapter_html: str) -> str:
    """One chapter of the FAQ as the set's document: its rest, then each question's heading
    over its answer."""
    pairs, rest = chapter_questions(chapter_html)
    if not rest:  # a chapter of questions only: its title alone
        title = BeautifulSoup(chapter_html, "html.parser").find("h1")
        words = " ".join(title.get_text(" ").split()) if isinstance(title, Tag) else ""
        rest = f"<h1>{html.escape(words)}</h1>" if words else ""
    parts = [rest] if rest else []
    parts.extend(f"<h2>{html.escape(question)}</h2>\n{answer}" for question, answer in pairs)
    return _PAGE.format(body="\n".join(parts))


def build_corpus(faq: Path, out_dir: Path) -> Path:
    """Write the chapters of the FAQ folder ``faq`` to ``out_dir`` (replacing what is there)
    and return it; ``EvalDataMissing`` naming ``make eval-data`` when ``faq`` holds no FAQ."""
    chapters = sorted(p for p in faq.glob(f"*{PAGE_SUFFIX}") if p.name != CONTENTS_PAGE)
    if not (faq / CONTENTS_PAGE).is_file() or not chapters:
        raise EvalDataMissing(
            f"its documents are the Debian FAQ's chapters, built from the debian-faq package "
            f"that `{MAKE_TARGET}` fetches, and there is no {faq / CONTENTS_PAGE} or no chapter "
            f"beside it. Fetch it once with `{MAKE_TARGET}` (it fills .ragtime/eval; for another "
            f"data dir, `{MAKE_TARGET} EVAL_DATA={faq.parent.parent}`)"
        )
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    for page in chapters:
        stem = page.name[: -len(PAGE_SUFFIX)]
        (out_dir / f"{stem}.html").write_text(chapter_page(page.read_text("utf-8")), "utf-8")
    return out_dir


def corpus_under(data_dir: Path) -> Path:
    """The set's documents built from ``<data_dir>/eval``, where ``make eval-data`` puts the
    FAQ, into ``<data_dir>/eval/debian-faq-answers-corpus``."""
    return build_corpus(faq_dir(Path(data_dir) / "eval"), Path(data_dir) / CORPUS_DIR)
