"""Documents prepared for a collection (parsed, chunked, embedded) apart from the store, then
written into its next snapshot.

An upload is prepared with no lock held (``prepare_documents``, in an ingest worker's process:
``workers``) and published by ``publish_prepared``, the one step that holds the collection's
lock; a folder's ingest (``folder``) writes each gathered batch as it goes. Both embed the same
way (``embed_pending``): the chunks of several files together, sorted by length and embedded in
batches of similar lengths (``embed_by_length``: little padding), put back in order, with each
chunk's sentences, whose vectors the snapshot keeps for attribution
(``retrieval.store.sentences``); and both write a prepared file the same way
(``write_prepared``: a copy, a message without text, or its chunks).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval.embedding.embedder import Embedder
from retrieval.ingest.chunking import Chunk, embedding_input
from retrieval.ingest.files import DocumentReader, FileTaker, Holders, Pending
from retrieval.ingest.report import IngestReport
from retrieval.ingest.tokens import TokenCounter, approximate_tokens, wordpiece_counter
from retrieval.store.document_store import DocumentStore
from retrieval.store.sentences import sentence_vectors
from retrieval.store.writer import SnapshotWriter, file_sha256


def embed_by_length(
    embedder: Embedder,
    texts: Sequence[str],
    on_batch: Callable[[int], None] | None = None,
) -> np.ndarray:
    """``embedder.embed(texts)``, in batches of similar lengths, rows in ``texts``' order;
    ``on_batch`` hears the size of each batch once it is embedded."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    vectors: np.ndarray | None = None
    step = max(embedder.batch_size, 1)
    for start in range(0, len(order), step):
        batch = order[start : start + step]
        part = embedder.embed([texts[i] for i in batch])
        if vectors is None:
            vectors = np.empty((len(texts), part.shape[1]), dtype=np.float32)
        vectors[batch] = part
        if on_batch is not None:
            on_batch(len(batch))
    if vectors is None:
        return embedder.embed([])
    return vectors


def default_token_counter(embedder: Embedder) -> TokenCounter:
    """The embedding model's own tokenizer when its directory has one, else the approximation."""
    model_dir = Path(embedder.model_name)
    if (model_dir / "tokenizer.json").is_file():
        return wordpiece_counter(model_dir)
    return approximate_tokens


@dataclass
class PreparedSource:
    """One file parsed, chunked and embedded, ready to be written into a snapshot."""

    source: str
    chunks: list[Chunk]
    vectors: np.ndarray
    sentence_vectors: list[np.ndarray]
    sha256: str
    root: str
    new: bool
    message: str = ""  # an attachment's e-mail
    copy_of: str = ""  # a copy's original (no chunks of its own)


@dataclass
class PreparedDocuments:
    """Documents prepared for a collection (``prepare_documents``), and what became of each
    one not among ``sources`` (in ``report``: unchanged, failed, duplicates)."""

    sources: list[PreparedSource]
    report: IngestReport
    embedding_backend: str
    embedding_model: str


def embed_pending(
    pending: Sequence[Pending],
    embedder: Embedder,
    on_batch: Callable[[int], None] | None = None,
) -> list[PreparedSource]:
    """``pending``'s chunks embedded together (and their sentences, for attribution)."""
    chunks = [c for item in pending for c in item.chunks]
    if chunks:
        vectors = embed_by_length(embedder, [embedding_input(c) for c in chunks], on_batch)
        said = sentence_vectors(
            lambda texts: embed_by_length(embedder, texts), [c.text for c in chunks]
        )
    else:  # copies only
        vectors, said = np.zeros((0, 0), np.float32), []
    prepared = []
    start = 0
    for item in pending:
        end = start + len(item.chunks)
        prepared.append(
            PreparedSource(
                item.source,
                item.chunks,
                vectors[start:end],
                said[start:end],
                item.sha256,
                item.root,
                item.new,
                item.message,
                item.copy_of,
            )
        )
        start = end
    return prepared


def write_prepared(writer: SnapshotWriter, prepared: PreparedSource, report: IngestReport) -> int:
    """Write ``prepared`` into ``writer``'s snapshot; the chunks stored."""
    if prepared.copy_of:
        of = writer.record_copy(
            prepared.source,
            prepared.copy_of,
            sha256=prepared.sha256,
            root=prepared.root,
            message=prepared.message,
        )
        if of is None:  # another upload changed it meanwhile
            reason = f"a copy of {prepared.copy_of}, which has changed since: ingest it again"
            report.failures.append((prepared.source, reason))
        else:
            report.copies.append((prepared.source, of))
        return 0
    if not prepared.chunks:  # a message without text of its own: its attachments follow
        writer.remove_source(prepared.source)
        return 0
    stored = writer.replace_source(
        prepared.source,
        prepared.chunks,
        prepared.vectors,
        sha256=prepared.sha256,
        root=prepared.root,
        sentence_vectors=prepared.sentence_vectors,
        message=prepared.message,
    )
    report.chunks += stored
    if prepared.message:
        report.attachments.append((prepared.source, prepared.message))
    else:
        report.files += 1
        (report.added if prepared.new else report.changed).append(prepared.source)
    return stored


def prepare_documents(
    documents: Sequence[tuple[str, bytes]],
    *,
    known: Mapping[str, str],
    embedder: Embedder,
    reader: DocumentReader,
    on_file: Callable[[str | None], None] | None = None,
) -> PreparedDocuments:
    """Parse, chunk and embed ``documents`` (``(source, bytes)``, each source a file name) for
    a collection whose current snapshot holds the sources ``known`` (source -> SHA-256 of the
    bytes its vectors came from, for this embedder's vectors): unchanged ones are left out.
    Touches no store and holds no lock (``publish_prepared`` writes the result). ``on_file``
    hears each source as its parsing begins, and None when embedding begins. A file over a
    limit raises ``LimitExceeded``, its message naming the file; other failures are reported."""
    embedder.load()
    report = IngestReport()
    taker = FileTaker(reader, report, Holders(known), refuse_over_limits=True)
    pending: list[Pending] = []
    for source, data in documents:
        if on_file is not None:
            on_file(source)
        item = Pending(source, len(data), [], file_sha256(data), "", source not in known)
        pending += taker.take(item, data, source, known.get(source))
    if on_file is not None:
        on_file(None)
    return PreparedDocuments(
        embed_pending(pending, embedder) if pending else [],
        report,
        embedder.backend,
        embedder.model_name,
    )


def publish_prepared(
    prepared: PreparedDocuments, store: DocumentStore, collection: str
) -> IngestReport:
    """Write ``prepared`` into ``collection``'s next snapshot and publish it: the one step
    that holds the collection's lock. A source whose bytes the snapshot now holds already
    (another upload published them meanwhile) is counted unchanged."""
    report = prepared.report
    with store.writer(
        collection,
        embedding_backend=prepared.embedding_backend,
        embedding_model=prepared.embedding_model,
    ) as writer:
        files = writer.files if writer.reuses_vectors else {}
        unchanged: set[str] = set()
        for item in prepared.sources:
            if item.message in unchanged:
                continue  # with its message
            known = files.get(item.source)
            if not item.message and known is not None and known.sha256 == item.sha256:
                report.unchanged.append(item.source)
                unchanged.add(item.source)
                continue
            write_prepared(writer, item, report)
        report.snapshot = writer.version if writer.changed else None
    return report
