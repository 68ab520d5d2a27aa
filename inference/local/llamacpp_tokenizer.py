"""The llama.cpp model's own tokenizer and chat template, behind ``PromptTokenizer``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from inference.errors import BackendUnavailable

# llama.h's llama_token_attr: the tokens that ``tokenize(..., special=True)`` parses from text.
_TOKEN_ATTR_CONTROL = 1 << 3
_TOKEN_ATTR_USER_DEFINED = 1 << 4

# Used only when a GGUF carries no chat template.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


class LlamaCppTokenizer:
    """Tokenizes with the vocabulary in the GGUF; renders its ``tokenizer.chat_template``.

    Thread-safe: tokenizing reads only the vocabulary, never the decoding context, so the
    assembler may run beside a decode on the worker thread.
    """

    def __init__(self, llm: Any) -> None:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self._llm: Any = llm
        self._special: tuple[str, ...] | None = None
        template = llm.metadata.get("tokenizer.chat_template") or CHATML_TEMPLATE
        self._formatter: Any = Jinja2ChatFormatter(
            template,
            eos_token=self._token_text(llm.token_eos()),
            bos_token=self._token_text(llm.token_bos()),
            add_generation_prompt=True,
        )

    def encode(self, text: str) -> list[int]:
        """Token ids, no BOS added; special-token strings become special tokens."""
        if not text:
            return []
        return list(self._model().tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of ``token_ids``, special tokens written out."""
        raw = self._model().detokenize(list(token_ids), special=True)
        return str(raw.decode("utf-8", errors="replace"))

    def render_chat(self, messages: Sequence[Mapping[str, str]]) -> str:
        response = self._formatter(messages=[dict(m) for m in messages])
        return str(response.prompt)

    def special_tokens(self) -> tuple[str, ...]:
        """The text of every control and user-defined token of the vocabulary (read once, about
        a millisecond per ten thousand tokens)."""
        if self._special is None:
            model = self._model()._model  # llama_cpp's LlamaModel: the vocabulary's attributes
            wanted = _TOKEN_ATTR_CONTROL | _TOKEN_ATTR_USER_DEFINED
            self._special = tuple(
                text
                for token in range(model.n_vocab())
                if model.token_get_attr(token) & wanted
                and (text := self._token_text(token).strip())
            )
        return self._special

    def close(self) -> None:
        """Called by the backend before it frees the model: later calls fail cleanly."""
        self._llm = None

    def _model(self) -> Any:
        if self._llm is None:
            raise BackendUnavailable("the llama.cpp backend is closed")
        return self._llm

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return str(self._llm.detokenize([token], special=True).decode("utf-8", errors="replace"))
