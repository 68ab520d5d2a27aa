"""What the simulated servers "run": deterministic output tokens, a detokenizer, a prefix cache.

Output token ``i`` depends on the prompt's ids and ``i`` only, so a test can predict the text.
The detokenizer holds back a token whose text is incomplete (ids divisible by 7 stand for the
first byte of a two-byte character), as SGLang's incremental detokenizer holds back partial
UTF-8: the cumulative text then does not grow on every token, and grows by more on the next.
The prefix cache is a trie over token ids, like RadixAttention's (page size 1).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

WORDS = (
    "the", "answer", "is", "in", "passage", "[1]", "and", "also", "see", "[2]",
    "lists", "are", "mutable", "tuples", "not", "because", "Python", "keeps", "them", "ordered",
)  # fmt: skip
EOS_ID = 2
VOCAB = 50_000


def output_ids(prompt_ids: Sequence[int], count: int) -> list[int]:
    seed = zlib.crc32(",".join(map(str, prompt_ids[-64:])).encode())
    return [(seed + 7919 * i) % VOCAB for i in range(count)]


def piece(token_id: int) -> str:
    if token_id % 7 == 0:
        return "é"  # completed only by the next token: held back while last
    return WORDS[token_id % len(WORDS)] + " "


def detokenize(ids: Sequence[int], *, final: bool = False) -> str:
    """The text of ``ids`` as a streaming detokenizer shows it: a dangling half-char held back
    (or, at the end of the request, flushed as U+FFFD)."""
    if ids and ids[-1] % 7 == 0:
        return "".join(piece(t) for t in ids[:-1]) + ("\ufffd" if final else "")
    return "".join(piece(t) for t in ids)


def text_ids(text: str) -> list[int]:
    """A stand-in tokenizer for requests that send ``text``: one id per word."""
    return [zlib.crc32(w.encode()) % VOCAB for w in text.split()]


class PrefixCache:
    """A trie over token ids: ``match`` returns the longest cached prefix's length."""

    def __init__(self) -> None:
        self.root: dict[int, Any] = {}

    def match(self, ids: Sequence[int]) -> int:
        node, n = self.root, 0
        for token in ids:
            if token not in node:
                break
            node, n = node[token], n + 1
        return n

    def insert(self, ids: Sequence[int]) -> None:
        node = self.root
        for token in ids:
            node = node.setdefault(token, {})

    def clear(self) -> None:
        self.root = {}
