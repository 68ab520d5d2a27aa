"""A tiny, randomly initialised cross-encoder, built locally in about a second.

It exists so that the rerank stage runs in benches (the offline default ships no cross-encoder,
and benches never reach a model hub): with ``RAGTIME_RERANKER_MODEL`` pointing at it, ragtime
loads it and reranks, so a fault injected into rerank (``RAGTIME_FAULT_RERANK_DELAY_MS``) has a
stage to slow down. The plumbing tests load the same model. It is NOT a quality model: its
scores are random and mean nothing; use it where a check is that a model loads and runs, not
what it ranks first.
"""

from __future__ import annotations

from pathlib import Path

_SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
_WORDS = [
    *("a", "an", "and", "are", "as", "at", "be", "by", "can", "default", "define", "do", "does"),
    *("for", "from", "function", "how", "i", "if", "in", "is", "it", "list", "loop", "of", "on"),
    *("or", "python", "return", "show", "the", "to", "use", "value", "values", "what", "when"),
    *("with", "you", "your"),
]


def build_tiny_cross_encoder(dir: Path) -> Path:
    """Save a one-layer BERT cross-encoder (``num_labels=1``) and its tokenizer in ``dir``.

    ``sentence_transformers.CrossEncoder(str(dir))`` loads it without network access; it builds
    in about a second. Returns ``dir``, made absolute (a server started elsewhere reads it).
    """
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    dir = dir.resolve()
    dir.mkdir(parents=True, exist_ok=True)
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = [*_SPECIAL, *_WORDS, *[w for w in letters if w not in _WORDS]]
    vocab += [f"##{c}" for c in letters] + list("0123456789.,?!:;()'\"-_=")
    vocab_file = dir / "vocab.txt"
    vocab_file.write_text("\n".join(vocab) + "\n")
    torch.manual_seed(0)
    config = BertConfig(  # type: ignore[call-arg]
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=512,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(dir)
    BertTokenizer(vocab_file=str(vocab_file), model_max_length=512).save_pretrained(dir)
    return dir
