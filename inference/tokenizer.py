"""The tokenizer protocol the prompt assembler needs: the generation model's own tokenizer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class PromptTokenizer(Protocol):
    """Counts and encodes exactly as the model will, and renders its chat template.

    ``encode`` parses special-token strings in ``text`` as special tokens, so the markers a chat
    template writes (e.g. ChatML's ``<|im_start|>``) become single ids, as in training.
    ``render_chat`` applies the model's own chat template with a generation prompt appended.
    """

    def encode(self, text: str) -> list[int]: ...

    def count(self, text: str) -> int: ...

    def render_chat(self, messages: Sequence[Mapping[str, str]]) -> str: ...
