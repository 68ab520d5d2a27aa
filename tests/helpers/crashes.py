"""The crashes ``hash_cli`` arms from ``CRASH_AT`` (see its docstring): the process SIGKILLs
itself on the Nth embedding or around one publish step, and the embedder to use."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from retrieval.ingest import folder as ingest_folder
from retrieval.store import writer as snapshot_writer
from tests.fakes.hash_embedder import HashEmbedder

STEPS = ("write_snapshot_files", "rename_into_place", "point_current", "prune")


def _die() -> None:
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


class _CrashingEmbedder(HashEmbedder):
    def __init__(self, crash_on_call: int) -> None:
        super().__init__()
        self.crash_on_call = crash_on_call
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.calls == self.crash_on_call:
            _die()
        return super().embed(texts)


def _wrap(step: str, when: str) -> None:
    # Replaced where ``SnapshotWriter.publish`` looks the step up: the writer module's name for
    # it (the steps are defined in ``retrieval.store.publishing``).
    original: Callable[..., Any] = getattr(snapshot_writer, step)

    def crashing(*args: Any, **kwargs: Any) -> Any:
        if when == "before":
            _die()
        result = original(*args, **kwargs)
        _die()
        return result

    setattr(snapshot_writer, step, crashing)


def install(crash_at: str) -> HashEmbedder:
    """The embedder to use, with the crash ``crash_at`` names armed ("" for none)."""
    if not crash_at:
        return HashEmbedder()
    kind, _, arg = crash_at.partition(":")
    if kind == "embed":
        # Each file embedded on its own (ingest gathers 256 chunks across files by default),
        # so that the Nth embedding comes after N-1 files were staged.
        ingest_folder.EMBED_GATHER = 1
        return _CrashingEmbedder(int(arg))
    if kind in ("before", "after") and arg in STEPS:
        _wrap(arg, kind)
        return HashEmbedder()
    raise SystemExit(f"CRASH_AT={crash_at!r}: expected embed:N, before:STEP or after:STEP")
