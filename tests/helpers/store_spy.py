"""What a snapshot writer is given to store, seen by a test without changing it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from retrieval.ingest.chunking import Chunk
from retrieval.store.writer import SnapshotWriter


def recording_writes(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Chunk]]:
    """The chunks each source is written with from now on (with their ordinals), by source;
    the writes themselves go through."""
    given: dict[str, list[Chunk]] = {}
    replace = SnapshotWriter.replace_source

    def record(
        writer: SnapshotWriter, source: str, chunks: Sequence[Chunk], vectors: Any, **kw: Any
    ) -> int:
        given[source] = list(chunks)
        return replace(writer, source, chunks, vectors, **kw)

    monkeypatch.setattr(SnapshotWriter, "replace_source", record)
    return given
