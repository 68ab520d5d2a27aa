"""The ``python-keywords`` evaluation set: queries as someone types them into a search box,
built from the same corpus as ``python-faq`` (``build_dataset``'s), reproducibly.

From every document of the corpus the candidates are taken, by kind:

* ``identifier``: dotted names (``os.path.join``, ``str.removeprefix``, ``spam.py``);
* ``name``: identifiers with an underscore (``__init__``, ``sys_path_hooks``);
* ``option``: command-line options (``--verbose``, ``-X``-style with a name: ``-bb`` excluded
  when shorter than four characters);
* ``error``: exception and warning class names (``UnicodeDecodeError``);
* ``number``: dotted numbers (``0.30000000000000004``, ``3.11.4``);
* ``message``: an error line as a traceback prints it (``NameError: name 'spam' is not
  defined``), whole.

A candidate is kept when it is rare: found in at least one and at most ``MAX_DOCUMENTS``
documents. ``QUESTIONS`` of them are drawn with a fixed seed (``SEED``), as evenly across the
kinds as they allow; the query is the candidate as written, and the relevant documents are all
those that hold it. The corpus is the FAQ set's, so both sets run over one store.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from dataclasses import replace

from retrieval.eval.python_faq import Dataset, Question
from retrieval.ingest.folder import iter_documents

DATASET = "python-keywords"
QUESTIONS = 240
SEED = 23
MAX_DOCUMENTS = 3

_KINDS: dict[str, re.Pattern[str]] = {
    "identifier": re.compile(r"(?<![\w.])[A-Za-z_]\w+(?:\.[A-Za-z_]\w*)+(?![\w])"),
    "name": re.compile(r"(?<![\w.])_*[A-Za-z]\w*_\w*[A-Za-z0-9_](?![\w.])"),
    "option": re.compile(r"(?<![\w-])--?[A-Za-z][\w-]{2,}(?![\w-])"),
    "error": re.compile(r"\b[A-Z][A-Za-z]*(?:Error|Exception|Warning)\b"),
    "number": re.compile(r"(?<![\w.])\d+\.\d+(?:\.\d+)*(?!\w|\.\d)"),
    "message": re.compile(
        r"^[ \t]*([A-Z][A-Za-z]*(?:Error|Exception): [^\n]{8,80})[ \t]*$", re.MULTILINE
    ),
}


def _candidates(text: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for kind, pattern in _KINDS.items():
        values = {m.group(m.lastindex or 0).strip() for m in pattern.finditer(text)}
        found[kind] = {v for v in values if len(v) >= 4}
    return found


def keyword_dataset(faq: Dataset, *, questions: int = QUESTIONS, seed: int = SEED) -> Dataset:
    """The keyword set over ``faq``'s corpus (see the module's docstring)."""
    holders: dict[tuple[str, str], set[str]] = defaultdict(set)
    for file in iter_documents(faq.corpus_dir):
        source = file.relative_to(faq.corpus_dir).as_posix()
        text = file.read_text("utf-8-sig", errors="replace")
        for kind, values in _candidates(text).items():
            for value in values:
                holders[(kind, value)].add(source)
    by_kind: dict[str, list[tuple[str, tuple[str, ...]]]] = defaultdict(list)
    for (kind, value), sources in sorted(holders.items()):
        if len(sources) <= MAX_DOCUMENTS:
            by_kind[kind].append((value, tuple(sorted(sources))))
    rng = random.Random(seed)
    for pool in by_kind.values():
        rng.shuffle(pool)
    drawn: list[tuple[str, str, tuple[str, ...]]] = []
    kinds = [k for k in _KINDS if by_kind[k]]
    while len(drawn) < questions and any(by_kind[k] for k in kinds):
        for kind in kinds:
            if by_kind[kind] and len(drawn) < questions:
                value, holding = by_kind[kind].pop()
                drawn.append((kind, value, holding))
    picked = [
        Question(f"{kind}-{n:03d}", value, sources[0], relevant=sources)
        for n, (kind, value, sources) in enumerate(drawn, start=1)
    ]
    return replace(faq, name=DATASET, questions=picked)
