"""The tokenizer protocol the prompt assembler needs: the generation model's own tokenizer."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from inference.errors import BackendUnavailable


@runtime_checkable
class PromptTokenizer(Protocol):
    """Counts and encodes exactly as the model will, and renders its chat template.

    ``encode`` parses special-token strings in ``text`` as special tokens, so the markers a chat
    template writes (e.g. ChatML's ``<|im_start|>``) become single ids, as in training.
    ``render_chat`` applies the model's own chat template with a generation prompt appended.
    ``special_tokens`` lists every string ``encode`` would turn into a special (control or added)
    token: the prompt assembler breaks them up in untrusted text (passages, the question), so
    that such text can never open a turn or end a document as the template's markers do.
    """

    def encode(self, text: str) -> list[int]: ...

    def count(self, text: str) -> int: ...

    def render_chat(self, messages: Sequence[Mapping[str, str]]) -> str: ...

    def special_tokens(self) -> Sequence[str]: ...


async def load_tokenizer(tokenizer: PromptTokenizer, owner: str) -> None:
    """Run the tokenizer's own ``load()`` in a thread, if it has one (a remote model's tokenizer
    loads from disk or a hub); a failure is the ``owner`` backend being unavailable."""
    load = getattr(tokenizer, "load", None)
    if not callable(load):
        return
    try:
        await asyncio.to_thread(load)
    except BackendUnavailable as exc:  # its message says what to do
        raise BackendUnavailable(f"{owner}: {exc}") from exc
    except Exception as exc:
        raise BackendUnavailable(f"{owner}: the tokenizer did not load: {exc}") from exc
