"""The served model's own tokenizer, from a Hugging Face directory or id, for remote backends.

A remote server (SGLang, vLLM) tokenizes with the model's ``tokenizer.json`` and chat template;
``HFTokenizer`` does the same here, so the prompt assembler counts the tokens the server will
run and the ids sent as ``input_ids`` are the ones its prefix cache is keyed on.

``encode`` adds no special tokens of its own: the chat template writes any BOS it needs, and
the special-token strings in the rendered text (``<|im_start|>``) are parsed as single tokens.
Construction is cheap; ``load()`` reads the files (a backend's ``start()`` calls it). Offline
(``HF_HUB_OFFLINE=1``, as ``make serve`` and the Kubernetes config set it, or
``local_files_only``) it reads the local Hugging Face cache only, and a model missing there is
``BackendUnavailable`` in one line saying how to get it (``not_cached``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from inference.errors import BackendUnavailable

__all__ = ["HFTokenizer"]

#: The values of ``HF_HUB_OFFLINE`` that huggingface_hub reads as true (``constants._is_true``).
_TRUE = frozenset({"1", "ON", "YES", "TRUE"})


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` forbids the hub now (read at each load, not at import)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in _TRUE


def not_cached(name: str) -> str:
    """What to do about a tokenizer that is neither a directory nor in the local cache."""
    if name.startswith(("/", ".", "~")) or name.count("/") > 1:  # a path, not a hub id
        return f"the tokenizer directory {name} does not exist (RAGTIME_SERVED_TOKENIZER)"
    return (
        f"the tokenizer of {name} is not in the local Hugging Face cache, and downloads are off "
        f"(HF_HUB_OFFLINE=1, as `make serve` sets it): download it once with `hf download {name}`"
        " (or run with HF_HUB_OFFLINE=0), or set RAGTIME_SERVED_TOKENIZER to a local directory "
        "that holds it"
    )


class HFTokenizer:
    """``transformers.AutoTokenizer`` behind the ``PromptTokenizer`` protocol.

    ``local_files_only=True`` never reaches a hub (``HF_HUB_OFFLINE=1`` has the same effect).
    """

    def __init__(self, name_or_path: str | Path, *, local_files_only: bool = False) -> None:
        self.name_or_path = str(name_or_path)
        self.local_files_only = local_files_only
        self._tokenizer: Any = None

    @property
    def loaded(self) -> bool:
        return self._tokenizer is not None

    def load(self) -> None:
        """Read the tokenizer and its chat template; idempotent."""
        if self._tokenizer is not None:
            return
        from transformers import AutoTokenizer  # here: importing ``inference`` stays light

        offline = self.local_files_only or hub_offline()
        local = Path(self.name_or_path).expanduser().is_dir()
        try:
            tokenizer = AutoTokenizer.from_pretrained(self.name_or_path, local_files_only=offline)
        except (OSError, ValueError) as exc:
            if offline and not local:
                raise BackendUnavailable(not_cached(self.name_or_path)) from exc
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BackendUnavailable(
                f"the tokenizer of {self.name_or_path} did not load: {first}"
            ) from exc
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(f"the tokenizer of {self.name_or_path} has no chat template")
        self._tokenizer = tokenizer

    @property
    def _tok(self) -> Any:
        if self._tokenizer is None:
            raise BackendUnavailable(f"the tokenizer {self.name_or_path} is not loaded")
        return self._tokenizer

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False))

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def special_tokens(self) -> list[str]:
        """Every special token (BOS, EOS, the chat markers, ``<file_sep>``...) and every added
        token marked special: the strings ``encode`` parses as single special ids."""
        tok = self._tok
        names = set(tok.all_special_tokens)
        names.update(t.content for t in tok.added_tokens_decoder.values() if t.special)
        return sorted(n for n in names if n)

    def render_chat(self, messages: Sequence[Mapping[str, str]]) -> str:
        rendered = self._tok.apply_chat_template(
            [dict(m) for m in messages], tokenize=False, add_generation_prompt=True
        )
        if not isinstance(rendered, str):
            raise TypeError(f"apply_chat_template returned {type(rendered).__name__}, not str")
        return rendered
