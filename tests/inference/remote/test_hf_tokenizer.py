"""``HFTokenizer`` on a tiny local tokenizer with a ChatML template (no hub access)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.sglang_sim.tokenizer import build_tiny_tokenizer
from inference import BackendUnavailable, HFTokenizer, PromptAssembler, PromptTokenizer


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


def test_a_missing_tokenizer_fails_to_load(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        HFTokenizer(tmp_path / "absent", local_files_only=True).load()
