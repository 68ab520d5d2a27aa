"""The ``emacs-faq`` evaluation set: the GNU Emacs FAQ (``efaq``), as Debian's emacs-common
package ships it in Info format, built into plain-text answers.

The Emacs FAQ gathers the questions users asked on Emacs's mailing lists and newsgroups since
1990 ("How do I turn on syntax highlighting?", "Why does Emacs say 'Error in init file'?"):
questions about using an editor, not a programming language's documentation. ``make
eval-data`` downloads the package (``apt-get download emacs-common``) and unpacks its
``usr/share/info/emacs/efaq.info.gz`` to ``<data_dir>/eval/emacs-faq/efaq.info``; nothing is
fetched here.

An Info file is plain text in nodes, each after a ``\\x1f`` line and a ``File: ..., Node:
...`` header, titled by a line underlined with ``*`` (the top and each chapter) or ``=`` (an
entry of a chapter): a node is one section, and an entry's text is its answer.
``build_dataset`` writes a corpus of ``.txt`` files, which ragtime's ingest reads as plain
text:

* each entry's answer as a file of its own (``faq-answers/answer-NNN.txt``): the node's text
  as Info shows it, WITHOUT its header, title and underline;
* the top node and each chapter's node (their introductions and menus of node names) as
  ``faq-pages/<node>.txt``, title included. Nothing else: the concept index (every index
  entry beside a node name) is left out, and so is the rest of Emacs's documentation.

A question is an entry: a node at the deepest level (``is_entry``, the rule python-faq uses),
129 in the FAQ of Emacs 28. Its words are the title's, without its number, and with Info's
quotes around code dropped (‘.emacs’ reads .emacs, as one types it). Most titles are
questions; a few are a topic ("Spell-checkers", "Downloading Emacs").

Licence: the FAQ is © Free Software Foundation and its earlier authors; its notice permits
copying, redistributing and transforming it into other formats under the same conditions
(``efaq.info``'s head); emacs-common is in Debian's main archive. This set copies nothing from
it into the repository: it reads the package that ``make eval-data`` fetched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from retrieval.eval.faq_corpus import (
    CorpusWriter,
    Dataset,
    check_sample,
    is_entry,
    kept,
    missing,
    question_text,
)

DATASET = "emacs-faq"
PACKAGE = "emacs-common"
INFO_FILE = "efaq.info"
PAGES_DIR = "faq-pages"
SUFFIX = ".txt"
LEFT_OUT = frozenset({"Concept index"})  # nodes that are not prose

_SEPARATOR = "\x1f"
_HEADER = re.compile(r"^File: [^,]+,\s+Node: (?P<node>[^,\n]+)")
_UNDERLINES = "*=-.~^"
_CODE_QUOTES = re.compile(r"‘([^‘’\n]*)’")


@dataclass(frozen=True)
class Node:
    name: str
    title: str  # "" for a node without an underlined title
    underline: str  # the title's underline character
    text: str  # the node's text after its title, blank lines at either end dropped


def info_file(data_dir: Path) -> Path:
    """Where ``make eval-data`` puts the FAQ's Info file."""
    return Path(data_dir) / DATASET / INFO_FILE


def require_info(data_dir: Path) -> Path:
    """The Info file, or ``EvalDataMissing`` saying which make target fetches it."""
    path = info_file(data_dir)
    if not path.is_file():
        raise missing(DATASET, PACKAGE, path, f"dpkg-deb -x and gunzip of {INFO_FILE}.gz")
    return path


def nodes(info: str) -> list[Node]:
    """The nodes of an Info file, in order; the tag table and other trailers are not nodes."""
    found = []
    for chunk in info.replace("\r\n", "\n").split(_SEPARATOR):
        lines = chunk.lstrip("\n").split("\n")
        header = _HEADER.match(lines[0])
        if not header:
            continue
        body = lines[1:]
        while body and not body[0].strip():
            body.pop(0)
        title, underline = "", ""
        rule = body[1].rstrip() if len(body) > 1 else ""
        if rule and rule[0] in _UNDERLINES and rule == rule[0] * len(rule):
            title, underline, body = body[0].strip(), rule[0], body[2:]
        text = "\n".join(body).strip("\n")
        found.append(Node(header["node"].strip(), title, underline, text))
    return found


def plain_question(title: str) -> str:
    """A title as someone types it: no number, no quotes around code, straight apostrophes."""
    text = _CODE_QUOTES.sub(lambda m: m[1], question_text(title))
    return text.replace("’", "'").replace("‘", "'")


def faq_questions(info: str) -> tuple[list[tuple[str, str, str]], list[Node]]:
    """``(chapter, question, answer)`` of every entry, in order, each answer the node's text;
    and the other nodes (the top, the chapters) but those ``LEFT_OUT``."""
    kept_nodes = [n for n in nodes(info) if n.name not in LEFT_OUT]
    styles = list(dict.fromkeys(n.underline for n in kept_nodes if n.underline))
    deepest = len(styles) - 1
    chapter = ""
    entries, others = [], []
    for node in kept_nodes:
        level = styles.index(node.underline) if node.underline else 0
        if not is_entry(level, deepest, node.title):
            chapter = node.name
            others.append(node)
        elif node.text.strip():
            entries.append((chapter, plain_question(node.title), node.text + "\n"))
    return entries, others


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "node"


def build_dataset(info: Path, out_dir: Path, *, sample: float = 1.0) -> Dataset:
    """Write the corpus under ``out_dir`` (replacing what is there) and return the dataset.

    ``sample`` < 1 keeps that share of the top and chapter pages (chosen by the hash of their
    path); every answer stays."""
    check_sample(sample)
    info = Path(info)
    entries, others = faq_questions(info.read_text("utf-8"))
    corpus = CorpusWriter(out_dir)
    numbers: dict[str, int] = {}
    for chapter, question, answer in entries:
        slug = _slug(chapter)
        numbers[slug] = numbers.get(slug, 0) + 1
        corpus.answer(f"{slug}-{numbers[slug]:03d}", question, answer, SUFFIX)
    for node in others:
        relative = f"{_slug(node.name)}{SUFFIX}"
        if node.text.strip() and kept(relative, sample):
            rule = node.underline * len(node.title)
            page = f"{node.title}\n{rule}\n\n{node.text}\n" if node.title else node.text + "\n"
            corpus.document(PAGES_DIR, relative, page.encode())
    return corpus.dataset(DATASET, sample, info)
