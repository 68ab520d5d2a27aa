"""``HFTokenizer`` on a tiny local tokenizer with a ChatML template (no hub access)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from bench.sglang_sim.tokenizer import build_tiny_tokenizer
from inference import BackendUnavailable, HFTokenizer, PromptAssembler, PromptTokenizer
from inference.tokenizer import load_tokenizer


def test_renders_the_chat_template_and_encodes_special_markers(tmp_path: Path) -> None:
    tok = HFTokenizer(build_tiny_tokenizer(tmp_path), local_files_only=True)
    assert isinstance(tok, PromptTokenizer) and not tok.loaded
    with pytest.raises(BackendUnavailable):
        tok.encode("a")
    tok.load()
    text = tok.render_chat(
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "what is a list?"}]
    )
    assert text.endswith("<|im_start|>assistant\n")
    assert text.startswith("<|im_start|>system\nbe brief<|im_end|>\n")
    ids = tok.encode(text)
    start = ids[0]
    assert ids[-2] == start  # the generation prompt: "<|im_start|>", "assistant"
    assert ids.count(start) == 3 and tok.count(text) == len(ids)
    assert tok.encode("<|im_start|>") == [start]  # one special token, no BOS added


def test_the_assembler_counts_with_it(tmp_path: Path) -> None:
    tok = HFTokenizer(build_tiny_tokenizer(tmp_path), local_files_only=True)
    tok.load()
    prompt = PromptAssembler(tok).assemble("what is a list?", [])
    assert prompt.token_ids == tok.encode(prompt.text)


def test_a_missing_tokenizer_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailable) as raised:
        HFTokenizer(tmp_path / "absent", local_files_only=True).load()
    assert str(raised.value) == (
        f"the tokenizer directory {tmp_path / 'absent'} does not exist (RAGTIME_SERVED_TOKENIZER)"
    )


def test_a_model_not_in_the_cache_offline_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 43: with ``HF_HUB_OFFLINE=1`` (``make serve``'s) a tokenizer not cached failed
    with transformers' text, which does not say what to do. Nothing is fetched: no host is
    even looked up."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    looked_up: list[object] = []
    lookup = socket.getaddrinfo

    def recorded(host: object, *args: Any, **kwargs: Any) -> Any:
        looked_up.append(host)
        return lookup(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", recorded)
    name = "ragtime-tests/not-cached-model"
    with pytest.raises(BackendUnavailable) as raised:
        HFTokenizer(name).load()
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"the tokenizer of {name} is not in the local Hugging Face cache")
    assert f"`hf download {name}`" in message and "HF_HUB_OFFLINE=0" in message
    assert "RAGTIME_SERVED_TOKENIZER" in message
    assert looked_up == []


async def test_a_backend_starting_reports_it_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BackendUnavailable) as raised:
        await load_tokenizer(HFTokenizer("ragtime-tests/not-cached-model"), "sglang")
    assert str(raised.value).startswith(
        "sglang: the tokenizer of ragtime-tests/not-cached-model is not in the local"
    )
