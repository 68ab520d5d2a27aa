"""What an evaluation set wrote: its corpus's files, for the sets' tests."""

from __future__ import annotations

from retrieval.eval.faq_corpus import Dataset


def corpus_files(dataset: Dataset) -> list[str]:
    """Every file of ``dataset``'s corpus, relative to it, sorted."""
    corpus = dataset.corpus_dir
    return sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*") if p.is_file())
