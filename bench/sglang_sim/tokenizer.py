"""A tiny Hugging Face tokenizer with a ChatML chat template, built locally (no hub).

The simulated SGLang server "serves" it: ragtime counts and sends real token ids of it, so its
prompts, prefix-cache hits and context-length fits are computed as against a real server. The
tests build it with a few words; a bench builds it with every word of the demo corpus
(``build_corpus_tokenizer``), so that passages do not tokenize to ``[UNK]``.
"""

from __future__ import annotations

import re
from pathlib import Path

from inference import DEFAULT_SYSTEM_PROMPT

SPECIAL = ["[UNK]", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_WORDS = (
    "a an and are as at be by can default do does for from function how i if in is it list "
    "lists loop of on or python return the to use value values what when with you your "
    "question passages passage system user assistant no were found"
)


def build_tiny_tokenizer(dir: Path, words: str = "") -> Path:
    """Save a word-level tokenizer (``[UNK]`` for unknown words) and ChatML template in ``dir``.

    ``HFTokenizer(dir, local_files_only=True)`` loads it. Returns ``dir``.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    text = " ".join([DEFAULT_SYSTEM_PROMPT, _WORDS, words])
    vocab_words = sorted(set(re.findall(r"\w+|[^\w\s]+", text.lower() + " " + text)))
    vocab_words += [
        c for c in "abcdefghijklmnopqrstuvwxyz0123456789.,:;?!()[]'\"-—" if c not in vocab_words
    ]
    vocab = {tok: i for i, tok in enumerate(SPECIAL + vocab_words)}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        eos_token="<|im_end|>",
        # Special tokens beyond the template's, as code models have (SmolLM2's ``<file_sep>``):
        # untrusted text must not be able to produce any of them.
        additional_special_tokens=["<|im_start|>", "<file_sep>", "[INST]", "</s>"],
    )
    fast.chat_template = CHATML
    dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(dir)
    return dir


DEMO_CORPUS = Path(__file__).resolve().parents[2] / "demo" / "corpus"


def build_corpus_tokenizer(dir: Path, corpus: Path = DEMO_CORPUS) -> Path:
    """``build_tiny_tokenizer`` with every word of ``corpus``'s ``.txt`` files; returns ``dir``."""
    words = sorted(
        {w.lower() for f in corpus.rglob("*.txt") for w in re.findall(r"\w+", f.read_text())}
    )
    return build_tiny_tokenizer(dir, " ".join(words))
