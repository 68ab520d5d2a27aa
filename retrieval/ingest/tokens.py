"""Token counts for chunk sizes: the embedding model's own WordPiece tokenizer, or a cheap
approximation.

``WordPieceCounter`` loads the ``tokenizer.json`` that ships beside the model (the shipped
MiniLM by default) with the ``tokenizers`` library: offline, no torch, a few milliseconds.
``approximate_tokens`` counts words with each punctuation mark as one, as WordPiece's
pre-tokenizer splits them; it undercounts the word pieces of rare words, and serves tests that
must not load a tokenizer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from retrieval.errors import RetrievalError

#: Text in, number of tokens out (special tokens not counted).
TokenCounter = Callable[[str], int]

_TOKENISH = re.compile(r"\w+|[^\w\s]")


def approximate_tokens(text: str) -> int:
    """Words and punctuation marks: a lower bound of the WordPiece count."""
    return len(_TOKENISH.findall(text))


class WordPieceCounter:
    """Counts tokens with the tokenizer of a sentence-transformers model directory."""

    def __init__(self, model_dir: Path | None = None) -> None:
        from tokenizers import Tokenizer

        if model_dir is None:
            from retrieval.embedding.embedder import default_embedding_model_path

            model_dir = default_embedding_model_path()
        path = Path(model_dir) / "tokenizer.json"
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises a bare Exception
            raise RetrievalError(f"cannot load the tokenizer {path}: {exc}") from exc
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self.model_dir = Path(model_dir)

    def __call__(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


@lru_cache(maxsize=4)
def wordpiece_counter(model_dir: Path | None = None) -> WordPieceCounter:
    """One loaded counter per model directory."""
    return WordPieceCounter(model_dir)
