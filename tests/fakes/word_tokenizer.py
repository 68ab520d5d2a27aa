"""A tokenizer in one line per method: one token per word, for prompt-packing tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class WordTokenizer:
    """Satisfies ``inference.PromptTokenizer``: a word's id is its length, a turn is ``<role>``."""

    def encode(self, text: str) -> list[int]:
        return [len(word) for word in text.split()]

    def count(self, text: str) -> int:
        return len(text.split())

    def special_tokens(self) -> Sequence[str]:
        return ()

    def render_chat(self, messages: Sequence[Mapping[str, str]]) -> str:
        return "".join(f"<{m['role']}>\n{m['content']}\n" for m in messages) + "<assistant>\n"
