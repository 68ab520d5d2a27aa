"""Embedding backends: a collection is searched only with the backend that built it (fast, with
``HashEmbedder``), and the ONNX backends agree with torch (slow: the real MiniLM)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from retrieval import Chunk, DocumentStore, Embedder, EmbeddingMismatch
from retrieval.errors import RetrievalError
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.legacy_store import write_legacy_collection

SENTENCES = [
    "How do I give a function parameter a default value?",
    "Default argument values: def ask_ok(prompt, retries=4) lets a function be called "
    "with fewer arguments than it is defined to allow.",
    "Floating point numbers are represented in computer hardware as base 2 fractions.",
    "short",
]


def _chunks(*texts: str) -> list[Chunk]:
    return [
        Chunk(text=t, source="a.md", title="A", section="", ordinal=i) for i, t in enumerate(texts)
    ]


def _ingest(root: Path, backend: str, source: str = "a.md") -> None:
    store = DocumentStore(root, embedding_backend=backend, embedding_model="hash-embedder")
    store.open()
    try:
        embedder = HashEmbedder()
        texts = ["lists hold items", "dicts map keys"]
        store.replace_source("demo", source, _chunks(*texts), embedder.embed(texts))
    finally:
        store.close()


def _search(root: Path, backend: str) -> list[str]:
    store = DocumentStore(root, embedding_backend=backend)
    store.open()
    try:
        vector = HashEmbedder().embed(["lists"])[0]
        return [p.text for p in store.search("demo", vector, 2)]
    finally:
        store.close()


def test_the_backend_that_built_a_collection_is_recorded_and_searches_it(tmp_path: Path) -> None:
    _ingest(tmp_path, "onnx-int8")
    store = DocumentStore(tmp_path)
    store.open()
    assert store.embedding_backend_of("demo") == "onnx-int8"
    store.close()
    assert _search(tmp_path, "onnx-int8")[0] == "lists hold items"


def test_a_search_with_another_backend_is_refused_with_a_hint(tmp_path: Path) -> None:
    _ingest(tmp_path, "onnx-int8")
    with pytest.raises(EmbeddingMismatch, match=r"re-ingest.*--rebuild") as caught:
        _search(tmp_path, "torch")
    assert caught.value.status_code == 409
    assert (caught.value.built_with, caught.value.wanted) == ("onnx-int8", "torch")


def test_an_index_without_a_record_counts_as_torch(tmp_path: Path) -> None:
    texts = ["lists hold items", "dicts map keys"]  # the old layout, before the record
    rows = [("a.md", t) for t in texts]
    write_legacy_collection(tmp_path, "demo", rows, HashEmbedder().embed(texts), backend=None)
    assert _search(tmp_path, "torch")[0] == "lists hold items"
    assert _search(tmp_path, "onnx")[0] == "lists hold items"  # the same vectors as torch
    with pytest.raises(EmbeddingMismatch):
        _search(tmp_path, "onnx-int8")


def test_an_ingest_that_would_mix_backends_is_refused(tmp_path: Path) -> None:
    _ingest(tmp_path, "torch", "a.md")
    with pytest.raises(EmbeddingMismatch, match="'torch'"):
        _ingest(tmp_path, "onnx-int8", "b.md")
    _ingest(tmp_path, "onnx-int8", "a.md")  # replacing the only source rebuilds it whole
    assert _search(tmp_path, "onnx-int8")[0] == "lists hold items"


def test_torch_and_onnx_fp32_share_an_index(tmp_path: Path) -> None:
    """They give the same vectors (cosine 1.0000), so an index of one serves the other."""
    _ingest(tmp_path, "torch", "a.md")
    _ingest(tmp_path, "onnx", "b.md")
    assert _search(tmp_path, "onnx")[0] == "lists hold items"
    assert _search(tmp_path, "torch")[0] == "lists hold items"


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.mark.slow
@pytest.mark.parametrize(("backend", "floor"), [("onnx", 0.9999), ("onnx-int8", 0.98)])
def test_onnx_vectors_agree_with_torch(
    backend: str, floor: float, onnx_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slow: exports the real MiniLM (about 10 s once) and loads it with torch too. Offline:
    the export reads the shipped weights only (HF_HUB_OFFLINE=1, and the network is blocked)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    reference = Embedder(backend="torch")
    reference.load()
    onnx = Embedder(backend=backend, cache_dir=onnx_cache)  # type: ignore[arg-type]
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    onnx.load()
    # The int8 quantizer's import configures logging at INFO; the export puts it back.
    assert (root.level, root.handlers, root.filters) == (level, handlers, [])
    assert onnx.loaded and onnx.dim == reference.dim == 384
    assert list(onnx_cache.glob("*/model.onnx"))
    ours, theirs = onnx.embed(SENTENCES), reference.embed(SENTENCES)
    assert ours.dtype == np.float32 and ours.shape == (len(SENTENCES), 384)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() >= floor, cosines
    assert cosines.mean() >= 0.99, cosines
    assert onnx.embed([]).shape == (0, 384)


@pytest.mark.slow
def test_onnx_batches_cut_by_tokens_and_run_side_by_side_give_each_texts_own_vector(
    onnx_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Texts of mixed lengths are cut into batches of about ``max_batch_tokens`` padded tokens,
    run on the worker pool (several batches), and each row is the text's vector as if it had
    been embedded alone; a text over the window is truncated as sentence-transformers does."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    onnx = Embedder(backend="onnx", cache_dir=onnx_cache)
    onnx.load()
    encoder = onnx._onnx
    assert encoder is not None
    texts = [" ".join(SENTENCES[: 1 + i % 4]) * (1 + i % 9) for i in range(40)]
    texts.append("word " * 2000)  # over the 256-token window
    together = encoder.encode(texts, batch_size=32, max_batch_tokens=300)
    alone = np.concatenate([encoder.encode([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=2e-5)
    assert encoder._bulk is not None  # more than one batch went to the side-by-side runner
    reference = Embedder(backend="torch")
    reference.load()
    cosines = (together * reference.embed(texts)).sum(axis=1)
    assert cosines.min() >= 0.9999, cosines


@pytest.mark.slow
def test_small_batches_on_one_thread_give_the_vectors_of_the_wide_session(
    onnx_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of at most ``ONE_THREAD_TOKENS`` padded tokens runs on the one-thread session,
    a wider one on the session with a thread per core: both give each text the same vector."""
    from retrieval.embedding.onnx_encoder import MAX_BATCH_TOKENS, ONE_THREAD_TOKENS

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    onnx = Embedder(backend="onnx", cache_dir=onnx_cache)  # int8's scales depend on the batch
    onnx.load()
    encoder = onnx._onnx
    assert encoder is not None
    texts = [" ".join(SENTENCES)] * 4 + SENTENCES
    widest = max(len(e.ids) for e in encoder._tokenizer.encode_batch(texts))
    assert ONE_THREAD_TOKENS < len(texts) * widest <= MAX_BATCH_TOKENS  # one batch, wide
    wide = encoder.encode(texts)
    alone = np.concatenate([encoder.encode([t]) for t in texts])
    np.testing.assert_allclose(wide, alone, atol=2e-5)
    assert encoder._bulk is None  # neither call needed the side-by-side runner


def test_a_dropped_collection_can_be_rebuilt_with_another_backend(tmp_path: Path) -> None:
    _ingest(tmp_path, "torch", "a.md")
    _ingest(tmp_path, "torch", "b.md")
    store = DocumentStore(tmp_path, embedding_backend="onnx-int8")
    store.open()
    assert not store.serves("demo")
    assert store.drop_collection("demo") == 4
    assert store.drop_collection("demo") == 0
    assert not store.has_collection("demo") and store.serves("demo")  # nothing left to refuse
    store.close()
    assert (tmp_path / "collections" / "demo" / "CURRENT").read_text().strip() == "v000003"
    _ingest(tmp_path, "onnx-int8", "b.md")
    assert _search(tmp_path, "onnx-int8")[0] == "lists hold items"


def test_workers_starting_together_export_the_onnx_model_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several ``ragtime serve`` workers start at once on an empty cache: one exports and
    quantizes while the others wait for its files (the quantizer's scratch file beside its
    source would be shared). The export and the quantizer are stood in for; the lock is real."""
    from retrieval.embedding import onnx_encoder

    model = tmp_path / "model"
    (model / "1_Pooling").mkdir(parents=True)
    (model / "modules.json").write_text(
        '[{"path": "", "type": "sentence_transformers.models.Transformer"},'
        ' {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]'
    )
    (model / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    busy, overlapped, made = threading.Lock(), [], []

    def working(name: str) -> Callable[[Path, Path], None]:
        def write(source: Path, target: Path) -> None:
            if not busy.acquire(blocking=False):
                overlapped.append(name)
                return
            try:
                made.append(name)
                time.sleep(0.05)
                target.write_bytes(b"onnx")
            finally:
                busy.release()

        return write

    monkeypatch.setattr(onnx_encoder, "_export_fp32", working("export"))
    monkeypatch.setattr(onnx_encoder, "_quantize_int8", working("quantize"))
    cache = tmp_path / "cache"

    def start(_: str) -> Path:
        return onnx_encoder.onnx_model_file(model, cache, int8=True)

    with ThreadPoolExecutor(4) as pool:
        files = list(pool.map(start, "abcd"))
    assert overlapped == [] and sorted(made) == ["export", "quantize"]
    assert len(set(files)) == 1 and files[0].read_bytes() == b"onnx"


@pytest.mark.slow
def test_token_vectors_are_each_texts_own_tokens(
    onnx_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Late interaction's input (issue 46 §3): a text's token vectors, one per WordPiece token
    without ``[CLS]`` and ``[SEP]``, each of norm 1, whatever the batch pads it to; only the
    ONNX backends give them."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    embedder = Embedder(backend="onnx", cache_dir=onnx_cache)
    embedder.load()
    short, long = "lists", "A list holds items in order; append adds one at its end."
    together = embedder.token_vectors([short, long])
    alone = embedder.token_vectors([short])
    assert [t.shape for t in together] == [(1, 384), (15, 384)]
    np.testing.assert_allclose(np.linalg.norm(together[1], axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(together[0], alone[0], atol=1e-4)  # padding changes nothing
    assert embedder.token_vectors([]) == []
    with pytest.raises(RetrievalError, match="ONNX backend"):
        torch_embedder = Embedder(backend="torch")
        torch_embedder.load()
        torch_embedder.token_vectors([short])
