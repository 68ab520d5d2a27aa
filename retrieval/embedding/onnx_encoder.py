"""ONNX Runtime embeddings of a sentence-transformers model, exported from its own weights.

The first load exports the model's transformer with ``torch.onnx.export`` (the TorchScript
exporter: no ``onnxscript``, no hub) and, for ``int8``, quantizes its weights with
``onnxruntime.quantization.quantize_dynamic``. Both files go in a cache directory, under a key
made of the model's path and its weight files' sizes and times, so later loads import neither
torch nor transformers: ``onnxruntime`` and ``tokenizers`` only. Files are written to a temporary
name and renamed, so a process never reads half a file; and one process at a time exports
into a model's folder (a lock file there), since several `ragtime serve` workers start together
on an empty cache and the quantizer's scratch file (``model-inferred.onnx``, beside its source)
would be theirs to share: two of them once left both workers without an embedder.

Only models made of ``Transformer`` -> ``Pooling`` (mean tokens) [-> ``Normalize``] are
supported (all-MiniLM-L6-v2 and most sentence-transformers embedders): pooling is the mean of
the token vectors under the attention mask, then L2 normalisation, as those modules compute it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import threading
import warnings
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.errors import RetrievalError

log = logging.getLogger(__name__)

#: Bump when the exported graph or its inputs change, so old cache entries are not reused.
_FORMAT = "1"
_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"
_WEIGHTS = ("model.safetensors", "pytorch_model.bin", "config.json", "tokenizer.json")
#: Padded tokens per ONNX run. Bigger batches run slower per text on a CPU (attention's scores
#: outgrow the caches): measured here, see docs/studies/ingest-and-formats.md's ingest section.
MAX_BATCH_TOKENS = 1024
#: Batches of at most this many padded tokens run on one thread. ``ragtime bench embed-threads``
#: (int8 MiniLM, sentences of 19 tokens, 2 cores; BENCHMARKS.md): 1, 4 and 8 sentences took
#: 1.96, 5.31 and 10.2 ms on one thread against 2.74, 6.35 and 10.2 ms on two, for 56% to 66%
#: of the CPU time; at 16 (304 tokens) two threads were 10% faster for 47% more CPU, at 32
#: (608) 27% faster. Under load the other core serves other requests.
ONE_THREAD_TOKENS = 384


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/ragtime/onnx`` (``~/.cache/ragtime/onnx``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ragtime" / "onnx"


def _check_modules(model_dir: Path) -> None:
    """Refuse a model whose modules the ONNX path does not reproduce exactly."""
    modules_file = model_dir / "modules.json"
    if not modules_file.exists():
        raise RetrievalError(f"{model_dir} has no modules.json: not a sentence-transformers model")
    modules = json.loads(modules_file.read_text())
    types = [m.get("type") for m in modules]
    if types not in ([_TRANSFORMER, _POOLING], [_TRANSFORMER, _POOLING, _NORMALIZE]):
        raise RetrievalError(
            f"the onnx backend supports Transformer -> Pooling [-> Normalize] models; "
            f"{model_dir} has {types}: use embedding_backend torch"
        )
    if modules[0].get("path", "") != "":
        raise RetrievalError(f"{model_dir}: the transformer must lie at the model's root")
    pooling = json.loads((model_dir / modules[1]["path"] / "config.json").read_text())
    modes = {key for key, value in pooling.items() if key.startswith("pooling_mode") and value}
    if modes != {"pooling_mode_mean_tokens"}:
        raise RetrievalError(
            f"the onnx backend supports mean pooling only; {model_dir} pools with {sorted(modes)}"
        )


def _max_seq_length(model_dir: Path) -> tuple[int, bool]:
    """The window sentence-transformers truncates to, and whether it lowercases first."""
    st_config = model_dir / "sentence_bert_config.json"
    config = json.loads(st_config.read_text()) if st_config.exists() else {}
    length = config.get("max_seq_length")
    if length is None:
        tok_config = model_dir / "tokenizer_config.json"
        tok = json.loads(tok_config.read_text()) if tok_config.exists() else {}
        length = min(int(tok.get("model_max_length", 512)), 512)
    return int(length), bool(config.get("do_lower_case", False))


def _cache_key(model_dir: Path) -> str:
    digest = hashlib.sha256(f"{_FORMAT}\0{model_dir.resolve()}".encode())
    for name in _WEIGHTS:
        path = model_dir / name
        if path.exists():
            stat = path.stat()
            digest.update(f"\0{name}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def _export_fp32(model_dir: Path, target: Path) -> None:
    """The transformer as ONNX: (input_ids, attention_mask, token_type_ids) -> token vectors."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_dir), local_files_only=True)
    model.eval()

    class _TokenVectors(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out[0]

    dummy = torch.ones((2, 8), dtype=torch.int64)
    axes = {0: "batch", 1: "tokens"}
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with torch.inference_mode(), warnings.catch_warnings():
            # The tracer's warnings here are about branches that are constant for an encoder
            # given a mask (no causal mask, no extra key padding) and an indexing op with
            # non-negative indices; padded batches match torch (cosine 1.0000, the slow test).
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            warnings.filterwarnings("ignore", "Exporting aten::index operator", UserWarning)
            torch.onnx.export(
                _TokenVectors(model),
                (dummy, dummy, torch.zeros_like(dummy)),
                str(tmp),
                input_names=["input_ids", "attention_mask", "token_type_ids"],
                output_names=["token_embeddings"],
                dynamic_axes={
                    "input_ids": axes,
                    "attention_mask": axes,
                    "token_type_ids": axes,
                    "token_embeddings": axes,
                },
                opset_version=17,
                dynamo=False,
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


class _QuantizerChatter(logging.Filter):
    """Drops the quantizer's own records below ERROR: one line per tensor (INFO) on the root
    logger, and advice to pre-process the model (WARNING) that does not apply to dynamic
    quantization of a transformer."""

    def filter(self, record: logging.LogRecord) -> bool:
        from_quantizer = f"onnxruntime{os.sep}quantization" in record.pathname
        return record.levelno >= logging.ERROR or not from_quantizer


@contextmanager
def _contained_root_logger() -> Iterator[None]:
    """Importing ``onnxruntime.quantization`` calls ``logging.basicConfig(level=INFO)`` (in
    ``matmul_nbits_quantizer``), which would leave the whole process logging at INFO on
    stderr: the root logger's level and handlers are put back, and the chatter filtered."""
    root = logging.getLogger()
    level, handlers, chatter = root.level, list(root.handlers), _QuantizerChatter()
    root.addFilter(chatter)
    try:
        yield
    finally:
        root.removeFilter(chatter)
        root.setLevel(level)
        root.handlers[:] = handlers


def _quantize_int8(source: Path, target: Path) -> None:
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with _contained_root_logger():
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(str(source), str(tmp), weight_type=QuantType.QInt8, per_channel=True)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def _one_exporter(folder: Path) -> Iterator[None]:
    """Hold ``folder``'s export lock (``flock``: released if the process dies) for the block."""
    with open(folder / ".export.lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def onnx_model_file(model_dir: Path, cache_dir: Path, *, int8: bool) -> Path:
    """The cached ONNX file of ``model_dir`` (fp32 or int8), exported on first use."""
    _check_modules(model_dir)
    folder = Path(cache_dir).expanduser() / f"{model_dir.name or 'model'}-{_cache_key(model_dir)}"
    fp32, quantized = folder / "model.onnx", folder / "model.int8.onnx"
    wanted = quantized if int8 else fp32
    try:
        if wanted.exists():
            return wanted
        folder.mkdir(parents=True, exist_ok=True)
        with _one_exporter(folder):  # another process may have made it meanwhile
            if not fp32.exists():
                log.info("exporting %s to ONNX under %s (once)", model_dir, folder)
                _export_fp32(model_dir, fp32)
            if int8 and not quantized.exists():
                log.info("quantizing %s to int8", fp32)
                _quantize_int8(fp32, quantized)
        return wanted
    except OSError as exc:
        raise RetrievalError(
            f"cannot write the ONNX export of {model_dir} under {folder} ({exc}): "
            "set RAGTIME_EMBEDDING_CACHE_DIR to a writable directory"
        ) from exc


class OnnxSentenceEncoder:
    """Tokenize, run the ONNX transformer, mean-pool under the mask, L2-normalise."""

    def __init__(self, model_dir: Path, cache_dir: Path, *, int8: bool) -> None:
        from tokenizers import Tokenizer

        model_dir = Path(model_dir)
        path = onnx_model_file(model_dir, cache_dir, int8=int8)
        self.max_seq_length, self._lowercase = _max_seq_length(model_dir)
        tokenizer_file = model_dir / "tokenizer.json"
        if not tokenizer_file.exists():
            raise RetrievalError(f"{model_dir} has no tokenizer.json (a fast tokenizer)")
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        # As sentence-transformers calls it: truncate to the window; each batch is padded to its
        # longest text here (``_run``), once the batches are cut by length.
        tokenizer.enable_truncation(max_length=self.max_seq_length)
        self._pad_id = int((tokenizer.padding or {}).get("pad_id", 0))  # before it is switched off
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self._session = self._new_session(path, threads=0)
        self._one_thread = self._new_session(path, threads=1)
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.path = path
        self._bulk_lock = threading.Lock()
        self._bulk: tuple[Any, ThreadPoolExecutor] | None = None
        self.dim = int(self.encode(["probe"]).shape[1])

    @staticmethod
    def _new_session(path: Path, *, threads: int) -> Any:
        """An ONNX Runtime session of ``path``; ``threads`` 0 is ORT's default (one per core)."""
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads
        # No spinning: by default ORT's pool threads busy-wait after each run, on the cores that
        # generation (llama.cpp, in the same process) and other requests need. Measured on our
        # 2 cores, one question every 10 ms: spinning cost 15.9 ms of CPU per question (fp32)
        # against 5.8 ms without, for 0.5 ms less latency (2.9 vs 3.4 ms); 32 passages: same.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def _bulk_runner(self) -> tuple[Any, ThreadPoolExecutor] | None:
        """For calls of several batches: a one-thread session and a worker per core, made on
        first use, so that batches run side by side. On our 2 cores this embedded the demo
        chunks faster than one session splitting each batch over both cores
        (docs/studies/ingest-and-formats.md's ingest section). ``None`` on one core."""
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        if workers < 2:
            return None
        with self._bulk_lock:
            if self._bulk is None:
                pool = ThreadPoolExecutor(workers, thread_name_prefix="onnx-embed")
                self._bulk = self._one_thread, pool
            return self._bulk

    def _session_for(self, encodings: Sequence[Any], batch: Sequence[int]) -> Any:
        """The one-thread session for a batch of at most ``ONE_THREAD_TOKENS`` padded tokens
        (a question, an answer's sentences), else the session with a thread per core."""
        padded = len(batch) * max(len(encodings[i].ids) for i in batch)
        return self._one_thread if padded <= ONE_THREAD_TOKENS else self._session

    def _token_embeddings(
        self, encodings: Sequence[Any], session: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The transformer's token vectors of tokenized texts, padded to the longest, and the
        attention mask that says which are tokens."""
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        types = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            ids[row, :n], mask[row, :n], types[row, :n] = encoding.ids, 1, encoding.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = types
        (tokens,) = (session or self._session).run(["token_embeddings"], feeds)
        return tokens, mask

    def _run(self, encodings: Sequence[Any], session: Any = None) -> np.ndarray:
        """The normalised mean-pooled vectors of tokenized texts, padded to the longest."""
        tokens, mask = self._token_embeddings(encodings, session)
        weights = mask[:, :, None].astype(np.float32)
        summed = (tokens * weights).sum(axis=1)
        counts = np.clip(weights.sum(axis=1), 1e-9, None)
        pooled = summed / counts
        norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return (pooled / norms).astype(np.float32)

    def _tokenize(self, texts: Sequence[str]) -> list[Any]:
        """The tokenizer's encodings of ``texts``, lowercased first where the model was trained
        so (its ``do_lower_case``)."""
        return self._tokenizer.encode_batch(
            [t.lower() for t in texts] if self._lowercase else list(texts)
        )

    def token_vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's token vectors before pooling, each of norm 1, without the ``[CLS]`` and
        ``[SEP]`` the tokenizer adds: what late interaction scores (a query token's best match
        among a passage's). One batch, padded to the longest text."""
        if not texts:
            return []
        encodings = self._tokenize(texts)
        tokens, mask = self._token_embeddings(encodings)
        vectors = []
        for row in range(len(texts)):
            own = tokens[row, 1 : int(mask[row].sum()) - 1]
            norms = np.clip(np.linalg.norm(own, axis=1, keepdims=True), 1e-12, None)
            vectors.append((own / norms).astype(np.float32))
        return vectors

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        max_batch_tokens: int = MAX_BATCH_TOKENS,
    ) -> np.ndarray:
        """One normalised float32 row per text.

        Texts are tokenized, sorted by length, and run in batches of at most ``batch_size``
        texts and about ``max_batch_tokens`` padded tokens (a text longer than that runs
        alone)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encodings = self._tokenize(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        batches: list[list[int]] = []
        start = 0
        while start < len(order):
            longest = len(encodings[order[start]].ids)
            size = max(1, min(batch_size, max_batch_tokens // max(longest, 1)))
            batches.append(order[start : start + size])
            start += size
        bulk = self._bulk_runner() if len(batches) > 1 else None
        if bulk is None:
            results = [
                self._run([encodings[i] for i in batch], self._session_for(encodings, batch))
                for batch in batches
            ]
        else:
            session, pool = bulk
            results = list(
                pool.map(lambda batch: self._run([encodings[i] for i in batch], session), batches)
            )
        out = np.empty((len(texts), results[0].shape[1]), dtype=np.float32)
        for batch, vectors in zip(batches, results, strict=True):
            out[batch] = vectors
        return out
