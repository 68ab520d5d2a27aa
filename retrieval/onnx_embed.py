"""ONNX Runtime embeddings of a sentence-transformers model, exported from its own weights.

The first load exports the model's transformer with ``torch.onnx.export`` (the TorchScript
exporter: no ``onnxscript``, no hub) and, for ``int8``, quantizes its weights with
``onnxruntime.quantization.quantize_dynamic``. Both files go in a cache directory, under a key
made of the model's path and its weight files' sizes and times, so later loads import neither
torch nor transformers: ``onnxruntime`` and ``tokenizers`` only. Files are written to a temporary
name and renamed, so processes exporting at once never read half a file.

Only models made of ``Transformer`` -> ``Pooling`` (mean tokens) [-> ``Normalize``] are
supported (all-MiniLM-L6-v2 and most sentence-transformers embedders): pooling is the mean of
the token vectors under the attention mask, then L2 normalisation, as those modules compute it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import warnings
from collections.abc import Iterator, Sequence
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


def onnx_model_file(model_dir: Path, cache_dir: Path, *, int8: bool) -> Path:
    """The cached ONNX file of ``model_dir`` (fp32 or int8), exported on first use."""
    _check_modules(model_dir)
    folder = Path(cache_dir).expanduser() / f"{model_dir.name or 'model'}-{_cache_key(model_dir)}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fp32 = folder / "model.onnx"
        if not fp32.exists():
            log.info("exporting %s to ONNX under %s (once)", model_dir, folder)
            _export_fp32(model_dir, fp32)
        if not int8:
            return fp32
        quantized = folder / "model.int8.onnx"
        if not quantized.exists():
            log.info("quantizing %s to int8", fp32)
            _quantize_int8(fp32, quantized)
        return quantized
    except OSError as exc:
        raise RetrievalError(
            f"cannot write the ONNX export of {model_dir} under {folder} ({exc}): "
            "set RAGTIME_EMBEDDING_CACHE_DIR to a writable directory"
        ) from exc


class OnnxSentenceEncoder:
    """Tokenize, run the ONNX transformer, mean-pool under the mask, L2-normalise."""

    def __init__(self, model_dir: Path, cache_dir: Path, *, int8: bool) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model_dir = Path(model_dir)
        path = onnx_model_file(model_dir, cache_dir, int8=int8)
        self.max_seq_length, self._lowercase = _max_seq_length(model_dir)
        tokenizer_file = model_dir / "tokenizer.json"
        if not tokenizer_file.exists():
            raise RetrievalError(f"{model_dir} has no tokenizer.json (a fast tokenizer)")
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        # As sentence-transformers calls it: truncate to the window, pad to the longest text.
        tokenizer.enable_truncation(max_length=self.max_seq_length)
        padding = tokenizer.padding or {}
        tokenizer.enable_padding(
            pad_id=int(padding.get("pad_id", 0)), pad_token=str(padding.get("pad_token", "[PAD]"))
        )
        self._tokenizer = tokenizer
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # No spinning: by default ORT's pool threads busy-wait after each run, on the cores that
        # generation (llama.cpp, in the same process) and other requests need. Measured on our
        # 2 cores, one question every 10 ms: spinning cost 15.9 ms of CPU per question (fp32)
        # against 5.8 ms without, for 0.5 ms less latency (2.9 vs 3.4 ms); 32 passages: same.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.path = path
        self.dim = int(self.encode(["probe"]).shape[1])

    def _batch(self, texts: Sequence[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(
            [t.lower() for t in texts] if self._lowercase else list(texts)
        )
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.asarray([e.type_ids for e in encodings], dtype=np.int64)
        (tokens,) = self._session.run(["token_embeddings"], feeds)
        weights = mask[:, :, None].astype(np.float32)
        summed = (tokens * weights).sum(axis=1)
        counts = np.clip(weights.sum(axis=1), 1e-9, None)
        pooled = summed / counts
        norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return (pooled / norms).astype(np.float32)

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """One normalised float32 row per text; batches of similar lengths, as s-t sorts them."""
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out: np.ndarray | None = None
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            vectors = self._batch([texts[i] for i in chunk])
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[chunk] = vectors
        assert out is not None
        return out
