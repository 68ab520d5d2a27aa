"""A published snapshot, loaded: its manifest, FAISS index, vectors, chunk table and (on first
use) BM25 index, answering dense and keyword searches, filtered or not.

What the files are and where they lie: ``layout``. A filter that keeps few chunks is searched
exactly over their stored vectors, a wider one through the index with an id selector (or, on a
GPU, which takes none, by fetching more and filtering).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from retrieval.errors import BrokenIndex, RetrievalError
from retrieval.search.bm25 import KEYWORD_DIR, KeywordIndex, chunk_document
from retrieval.search.filters import SearchFilter
from retrieval.search.index_types import search_parameters, to_device
from retrieval.search.source_names import SourceNames
from retrieval.store.layout import (
    CHUNKS_DB,
    IDS,
    INDEX,
    MANIFEST,
    SENTENCE_OFFSETS,
    SENTENCE_VECTORS,
    VECTORS,
    Manifest,
    connect_read_only,
    verify_checksums,
)

log = logging.getLogger(__name__)

#: A filter that keeps at most this many chunks is searched exactly over their stored vectors
#: (a matrix product); a wider one goes through the index with an ``IDSelectorBatch``.
EXACT_FILTER_MAX = 20_000
CHUNK_COLUMNS = "id, source, title, section, text, page, kind"


def _load_sentences(path: Path, chunks: int) -> tuple[np.ndarray, np.ndarray] | None:
    """A snapshot's sentence vectors and offsets, when it keeps them and they agree with its
    chunk count (else None: attribution embeds the passages, as before they were kept)."""
    if not (path / SENTENCE_OFFSETS).is_file():
        return None
    try:
        offsets = np.load(path / SENTENCE_OFFSETS, mmap_mode="r")
        vectors = np.load(path / SENTENCE_VECTORS, mmap_mode="r")
    except (OSError, ValueError) as exc:
        log.warning("snapshot %s: its sentence vectors cannot be read (%s): not used", path, exc)
        return None
    if len(offsets) != chunks + 1 or (chunks and int(offsets[-1]) != len(vectors)):
        log.warning("snapshot %s: its sentence vectors do not match its chunks: not used", path)
        return None
    return vectors, offsets


def keyword_documents(db: sqlite3.Connection) -> list[str]:
    """What the BM25 index holds of each chunk of a chunk table, in id order (the order of a
    snapshot's ``ids``)."""
    rows = db.execute("SELECT title, section, text FROM chunks ORDER BY id")
    return [chunk_document(*row) for row in rows]


class Snapshot:
    """A published snapshot, loaded: its manifest, index, vectors and chunk table. Immutable,
    so safe to share between threads (SQLite reads take the object's lock). A search holds a
    reference for its duration: an older snapshot swapped out lives until its last search ends.
    """

    def __init__(
        self,
        path: Path,
        manifest: Manifest,
        index: Any,
        ids: np.ndarray,
        vectors: np.ndarray,
        db: sqlite3.Connection,
        device: str,
        sentences: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        self.path = path
        self.sentences = sentences
        """``(vectors, offsets)`` of the chunks' sentences, when the snapshot keeps them."""
        self.manifest = manifest
        self.index = index
        self.ids = ids
        self.vectors = vectors
        self.device = device
        """Where the index runs, and why: ``cpu: <reason>`` or ``gpu: <devices>``."""
        self.on_gpu = device.startswith("gpu")
        self.names = SourceNames.of(manifest.files)
        """The copies of each source and the message of each attachment."""
        self._db = db
        self._lock = threading.Lock()
        has_ocr = any(row[1] == "ocr" for row in db.execute("PRAGMA table_info(chunks)"))
        self._columns = f"{CHUNK_COLUMNS}, ocr" if has_ocr else CHUNK_COLUMNS
        self._keyword: KeywordIndex | None = None
        self._keyword_lock = threading.Lock()
        self.keyword_source = "stored" if (path / KEYWORD_DIR).is_dir() else "none"
        """Where the BM25 index comes from: ``stored`` in the snapshot, or (a snapshot written
        before it was kept) ``none`` until the first keyword search builds it in memory:
        ``built``."""

    @classmethod
    def load(cls, path: Path, *, use_gpu: bool = False, verify: bool = True) -> Snapshot:
        """Read the snapshot at ``path``, its files checked against the manifest's checksums
        unless ``verify`` is false (its writer has just checked them); ``RetrievalError``
        saying what is wrong (``BrokenIndex`` for a checksum that does not match)."""
        try:
            manifest = Manifest.from_json((path / MANIFEST).read_text(encoding="utf-8"))
            if verify:
                verify_checksums(path, manifest)
            ids = np.load(path / IDS, mmap_mode="r")
            vectors = np.load(path / VECTORS, mmap_mode="r")
            index = faiss.read_index(str(path / INDEX)) if manifest.chunks else None
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
            raise RetrievalError(f"cannot read snapshot {path}: {exc}") from exc
        if len(ids) != manifest.chunks or (index is not None and index.ntotal != manifest.chunks):
            raise RetrievalError(
                f"snapshot {path} is inconsistent: {manifest.chunks} chunks in the manifest, "
                f"{len(ids)} ids, {index.ntotal if index is not None else 0} vectors indexed"
            )
        device = "cpu: empty"
        if index is not None:
            index, device = to_device(index, manifest.index, wanted=use_gpu)
        db = connect_read_only(path / CHUNKS_DB)
        return cls(path, manifest, index, ids, vectors, db, device, _load_sentences(path, len(ids)))

    def sentence_rows(self, chunk_id: int) -> np.ndarray | None:
        """The unit vectors of chunk ``chunk_id``'s sentences (float32 rows, in
        ``retrieval.store.sentences.sentences`` order); None when the snapshot keeps none or
        does not hold the chunk."""
        if self.sentences is None or not len(self.ids):
            return None
        at = int(np.searchsorted(self.ids, chunk_id))
        if at >= len(self.ids) or int(self.ids[at]) != chunk_id:
            return None
        vectors, offsets = self.sentences
        return np.asarray(vectors[int(offsets[at]) : int(offsets[at + 1])], dtype=np.float32)

    @property
    def version(self) -> str:
        return self.manifest.version

    @property
    def count(self) -> int:
        return self.manifest.chunks

    def rows(self, ids: Iterable[int]) -> dict[int, tuple[Any, ...]]:
        """The chunk rows (``CHUNK_COLUMNS``, then ``ocr`` where the table has it) of ``ids``
        this snapshot holds."""
        wanted = sorted({int(i) for i in ids})
        rows: dict[int, tuple[Any, ...]] = {}
        with self._lock:
            for start in range(0, len(wanted), 500):  # stay under SQLite's variable limit
                batch = wanted[start : start + 500]
                marks = ",".join("?" * len(batch))
                query = f"SELECT {self._columns} FROM chunks WHERE id IN ({marks})"
                rows.update((row[0], row) for row in self._db.execute(query, batch))
        return rows

    def matching_ids(self, search_filter: SearchFilter) -> np.ndarray:
        """The ids of the chunks ``search_filter`` keeps (a copy's name keeps its original's)."""
        condition, params = search_filter.sql(
            self.names.originals_under(search_filter.source_prefix)
        )
        with self._lock:
            found = self._db.execute(f"SELECT id FROM chunks WHERE {condition}", params)
            return np.fromiter((row[0] for row in found), dtype=np.int64)

    def search(
        self, query: np.ndarray, k: int, search_filter: SearchFilter | None = None
    ) -> tuple[list[tuple[int, float]], str]:
        """The ``k`` nearest chunks as ``(id, score)``, best first, and how they were found
        (``index``, ``exact-filtered`` or ``index-filtered``)."""
        if self.index is None or k <= 0:
            return [], "empty"
        if query.shape[1] != self.index.d:
            raise ValueError(f"vector has {query.shape[1]} dimensions, index has {self.index.d}")
        if search_filter is None or not search_filter.active:
            return self._index_search(query, k, None), "index"
        allowed = self.matching_ids(search_filter)
        if not len(allowed):
            return [], "exact-filtered"
        if len(allowed) <= EXACT_FILTER_MAX:
            return self._exact_search(query, k, allowed), "exact-filtered"
        if self.on_gpu:  # GPU indexes take no id selector: fetch more, then filter
            return self._overfetch_search(query, k, allowed), "overfetch-filtered"
        selector = faiss.IDSelectorBatch(allowed)
        return self._index_search(query, k, selector), "index-filtered"

    def _index_search(self, query: np.ndarray, k: int, selector: Any) -> list[tuple[int, float]]:
        params = search_parameters(self.manifest.index, selector)
        kwargs = {} if params is None or self.on_gpu else {"params": params}
        # One query runs on the calling thread alone (OpenMP's setting is per thread): waking
        # FAISS's OpenMP team costs more than it saves for one query, and under load the team
        # waits for a free core (median 8 ms per search on the loaded bench, 0.02 ms alone).
        threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)
        try:
            scores, ids = self.index.search(query, min(k, self.index.ntotal), **kwargs)
        finally:
            faiss.omp_set_num_threads(threads)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]

    def _exact_search(
        self, query: np.ndarray, k: int, allowed: np.ndarray
    ) -> list[tuple[int, float]]:
        rows = np.searchsorted(self.ids, allowed)
        scores = np.asarray(self.vectors[rows], dtype=np.float32) @ query[0]
        top = min(k, len(scores))
        best = np.argpartition(-scores, top - 1)[:top]
        best = best[np.argsort(-scores[best], kind="stable")]
        return [(int(allowed[i]), float(scores[i])) for i in best]

    def _overfetch_search(
        self, query: np.ndarray, k: int, allowed: np.ndarray
    ) -> list[tuple[int, float]]:
        keep = set(allowed.tolist())
        fetch = k * 4
        while True:
            hits = self._index_search(query, fetch, None)
            kept = [hit for hit in hits if hit[0] in keep]
            if len(kept) >= k or fetch >= self.index.ntotal:
                return kept[:k]
            fetch *= 4

    def keyword_index(self) -> KeywordIndex:
        """The BM25 index, loaded on first use (its files were checked with the others at
        open); a snapshot without one builds it in memory from its chunk table, once."""
        with self._keyword_lock:
            if self._keyword is None:
                if self.keyword_source == "stored":
                    try:
                        self._keyword = KeywordIndex.load(self.path / KEYWORD_DIR)
                    except (OSError, ValueError, KeyError) as exc:
                        raise BrokenIndex(
                            f"snapshot {self.path}: its keyword index cannot be read: {exc}"
                        ) from exc
                else:
                    with self._lock:
                        documents = keyword_documents(self._db)
                    self._keyword = KeywordIndex.build(documents)
                    self.keyword_source = "built"
                    log.info(
                        "snapshot %s keeps no keyword index: built one in memory (%d chunks)",
                        self.path,
                        len(documents),
                    )
                if self._keyword.count != self.count:
                    raise BrokenIndex(
                        f"snapshot {self.path}: its keyword index holds {self._keyword.count} "
                        f"chunks, the manifest {self.count}"
                    )
            return self._keyword

    def keyword_rarity(self, text: str) -> float:
        """How distinctive ``text``'s rarest word is among the chunks (``KeywordIndex.rarity``);
        0 for an empty snapshot."""
        return self.keyword_index().rarity(text) if self.count else 0.0

    def keyword_search(
        self, query: str, k: int, search_filter: SearchFilter | None = None
    ) -> tuple[list[tuple[int, float]], str]:
        """The ``k`` chunks that best match ``query``'s words (BM25) as ``(id, score)``, best
        first, only those holding one of its words, and how they were found (``bm25`` or
        ``bm25-filtered``)."""
        if not self.count or k <= 0:
            return [], "empty"
        index = self.keyword_index()
        allowed = None
        method = "bm25"
        if search_filter is not None and search_filter.active:
            method = "bm25-filtered"
            allowed = np.searchsorted(self.ids, self.matching_ids(search_filter))
            if not len(allowed):
                return [], method
        hits = index.search(query, k, allowed)
        return [(int(self.ids[i]), score) for i, score in hits], method

    def sources(self) -> list[str]:
        return sorted(self.manifest.files)

    def close(self) -> None:
        with self._lock:
            self._db.close()


def passages_of(
    snapshot: Snapshot, hits: Sequence[tuple[int, float]]
) -> list[tuple[tuple[Any, ...], float]]:
    """The rows of ``hits`` with their scores, in the hits' order (missing ids left out)."""
    rows = snapshot.rows(i for i, _ in hits)
    return [(rows[i], score) for i, score in hits if i in rows]
