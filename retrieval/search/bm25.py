"""Keyword search beside the vectors: a BM25 index (``bm25s``) over a snapshot's chunks.

Each chunk is indexed as its title, section and text, in the snapshot's ``ids`` order (document
``i`` of the index is chunk ``ids[i]``). Tokens are bm25s's, lowercased, English stopwords
removed, with a splitter of our own: bm25s's default pattern (``\\b\\w\\w+\\b``) cuts
``os.path.join`` into ``os``, ``path``, ``join``, ``--verbose`` into ``verbose`` and ``3.11``
into ``11``, so an exact identifier could not be told from its words. Ours keeps the whole
(``os.path.join``, ``--verbose``, ``3.11``, ``__init__``) and its parts besides. A query's
compound that the index knows is searched whole, without its parts (a chunk that repeats
``path`` and ``join`` would outrank the one holding the identifier); one it does not know is
searched by its parts, which still find the words. bm25s (and scipy under it) is imported at
the first index built or loaded. How a keyword ranking joins the dense one: ``fusion``.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.formats.document import first_section

if TYPE_CHECKING:
    from bm25s.tokenization import Tokenizer

#: The folder of a snapshot that holds its BM25 index (bm25s's files).
KEYWORD_DIR = "bm25"
#: A word (two or more word characters), or a compound of words joined by ``.``, ``-`` or
#: ``_`` (``os.path.join``, ``utf-8``, ``3.11``), with any leading dashes (``--verbose``).
_COMPOUND = re.compile(r"(?u)-{0,2}\w[\w]*(?:[.\-]\w+)*")
_PART = re.compile(r"(?u)\w\w+")


def split_tokens(text: str) -> list[str]:
    """``text``'s tokens: each compound whole, then its parts of two or more characters."""
    tokens: list[str] = []
    for match in _COMPOUND.finditer(text):
        whole = match.group(0)
        parts = _PART.findall(whole)
        if whole not in parts and len(whole) >= 2:
            tokens.append(whole)
        tokens.extend(parts)
    return tokens


def _quiet() -> None:
    """bm25s sets its logger to DEBUG at import (``bm25s/__init__.py``), which would print
    "Building index from IDs objects" at every publish: back to the root's level."""
    logging.getLogger("bm25s").setLevel(logging.NOTSET)


def _tokenizer() -> Tokenizer:
    from bm25s.tokenization import Tokenizer

    _quiet()

    return Tokenizer(lower=True, splitter=split_tokens, stopwords="en")


def tokens(text: str) -> list[str]:
    """The index's tokens of ``text`` (a query's), as bm25s's tokenizer makes them."""
    found = _tokenizer().tokenize([text], return_as="string", show_progress=False)
    return [token for token in found[0] if token]


def chunk_document(title: str, section: str, text: str) -> str:
    """What the index holds of one chunk: the section it starts in (the headings of the others
    it spans are lines of its text), as its embedding has it."""
    return f"{title}\n{first_section(section)}\n{text}"


def _idf(df: int, n: int) -> float:
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


class KeywordIndex:
    """A BM25 index over ``n`` documents (a snapshot's chunks, in ``ids`` order)."""

    def __init__(self, retriever: Any, count: int) -> None:
        self._retriever = retriever
        self.count = count

    @classmethod
    def build(cls, documents: Sequence[str]) -> KeywordIndex:
        import bm25s

        tokenized = _tokenizer().tokenize(list(documents), return_as="tuple", show_progress=False)
        retriever = bm25s.BM25()
        retriever.index(tokenized, show_progress=False)
        return cls(retriever, len(documents))

    def save(self, folder: Path) -> list[Path]:
        """bm25s's files in ``folder``; the paths written."""
        folder.mkdir(parents=True, exist_ok=True)
        self._retriever.save(str(folder))
        return sorted(p for p in folder.rglob("*") if p.is_file())

    @classmethod
    def load(cls, folder: Path) -> KeywordIndex:
        import bm25s

        _quiet()
        retriever = bm25s.BM25.load(str(folder), mmap=True)
        return cls(retriever, int(retriever.scores["num_docs"]))

    def _query_tokens(self, query: str) -> list[str]:
        """``query``'s tokens the index knows; a compound it knows (``os.path.join``) stands
        without its parts, which would otherwise outweigh it in chunks that repeat them."""
        vocab = self._retriever.vocab_dict
        known = [word for word in tokens(query) if word in vocab]
        for whole in [word for word in known if _PART.findall(word) != [word]]:
            for part in _PART.findall(whole):
                if part in known:
                    known.remove(part)
        return known

    def rarity(self, query: str) -> float:
        """How distinctive ``query``'s rarest word is in this index: its inverse document
        frequency as BM25 weighs it (``ln(1 + (N - df + 0.5) / (df + 0.5))``, bm25s's
        default, Lucene's), over that of a word found in one chunk alone; 0 when the index
        knows none of its words, 1 for a word only one chunk holds."""
        words = self._query_tokens(query)
        if not words or self.count < 2:
            return 0.0
        vocab = self._retriever.vocab_dict
        pointers = self._retriever.scores["indptr"]
        rarest = min(int(pointers[vocab[w] + 1] - pointers[vocab[w]]) for w in words)
        return _idf(max(rarest, 1), self.count) / _idf(1, self.count)

    def search(
        self, query: str, k: int, allowed: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` best documents for ``query`` as ``(position, score)``, best first; only
        those scoring above 0 (holding a query token), and only ``allowed`` positions when
        given."""
        words = self._query_tokens(query)
        if not words or k <= 0 or not self.count:
            return []
        scores = np.asarray(self._retriever.get_scores(words), dtype=np.float32)
        if allowed is not None:
            masked = np.zeros_like(scores)
            masked[allowed] = scores[allowed]
            scores = masked
        hits = np.flatnonzero(scores > 0)
        if not len(hits):
            return []
        top = min(k, len(hits))
        best = hits[np.argpartition(-scores[hits], top - 1)[:top]]
        best = best[np.lexsort((best, -scores[best]))]  # by score, then position: stable
        return [(int(i), float(scores[i])) for i in best]
