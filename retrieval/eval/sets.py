"""The evaluation sets by name: what ``ragtime eval retrieval --dataset NAME`` builds.

Each ``EvalSet`` reads the data that ``make eval-data`` fetched (``data``: the folder it filled)
and writes its corpus to ``corpus`` (``EvalDataMissing``, naming the make target, when the
data is not there):

* ``python-faq``: the Python FAQ's questions over the Python documentation (``python_faq``);
* ``python-keywords``, ``python-phrases``: typed keywords and remembered phrases drawn from
  that same corpus (``python_keywords``, ``python_phrases``);
* ``debian-faq``: the Debian FAQ's questions over the Debian FAQ (``debian_faq``);
* ``emacs-faq``: the GNU Emacs FAQ's questions over the Emacs FAQ (``emacs_faq``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from retrieval.eval import debian_faq, emacs_faq, python_faq
from retrieval.eval.faq_corpus import Dataset
from retrieval.eval.python_keywords import keyword_dataset
from retrieval.eval.python_phrases import phrase_dataset


@dataclass(frozen=True)
class EvalSet:
    name: str
    about: str  # what its questions are, in a few words
    build: Callable[[Path, Path, float], Dataset]  # (data, corpus, sample) -> the set


def _python_faq(data: Path, corpus: Path, sample: float) -> Dataset:
    return python_faq.build_dataset(python_faq.require_sources(data), corpus, sample=sample)


def _debian_faq(data: Path, corpus: Path, sample: float) -> Dataset:
    return debian_faq.build_dataset(debian_faq.require_faq(data), corpus, sample=sample)


def _emacs_faq(data: Path, corpus: Path, sample: float) -> Dataset:
    return emacs_faq.build_dataset(emacs_faq.require_info(data), corpus, sample=sample)


SETS: dict[str, EvalSet] = {
    s.name: s
    for s in (
        EvalSet("python-faq", "the Python FAQ's questions", _python_faq),
        EvalSet(
            "python-keywords",
            "keyword queries drawn from the Python FAQ's corpus",
            lambda data, corpus, sample: keyword_dataset(_python_faq(data, corpus, sample)),
        ),
        EvalSet(
            "python-phrases",
            "remembered phrases drawn from the Python FAQ's corpus",
            lambda data, corpus, sample: phrase_dataset(_python_faq(data, corpus, sample)),
        ),
        EvalSet("debian-faq", "the Debian FAQ's questions", _debian_faq),
        EvalSet("emacs-faq", "the GNU Emacs FAQ's questions", _emacs_faq),
    )
}


def build_set(name: str, data: Path, corpus: Path, *, sample: float = 1.0) -> Dataset:
    """The set called ``name``, its corpus written to ``corpus``; ``KeyError`` for no such
    set."""
    return SETS[name].build(Path(data), Path(corpus), sample)
