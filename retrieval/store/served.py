"""The snapshot each collection of a store is served from now, and how a new one is picked up.

Readers hold no lock across a search: each takes the collection's current ``Snapshot`` object,
which never changes. ``refresh()`` (cheap: a ``stat`` of each pointer) loads a snapshot another
process published and swaps it in; ``watch()`` runs it in a background thread, so that a
running server picks up a new index without a restart while searches in flight finish on the
old one. A snapshot that cannot be loaded leaves its collection broken (or serving the one
before it), with the reason. ``DocumentStore`` builds on ``ServedSnapshots``.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from retrieval.errors import BrokenIndex, RetrievalError, UnknownCollection
from retrieval.search.index_types import IndexSettings
from retrieval.store.layout import POINTER, collection_dir, read_pointer, snapshots_dir
from retrieval.store.snapshot import Snapshot

log = logging.getLogger(__name__)


class ServedSnapshots:
    """The current snapshot of each collection under ``root`` (loaded with ``index_settings``'s
    device), those that cannot be served and why, and the watcher that picks up new ones."""

    def __init__(self, root: Path, index_settings: IndexSettings) -> None:
        self.root = root
        self.index_settings = index_settings
        self._snapshots: dict[str, Snapshot] = {}
        """Current snapshot per collection: replaced whole on every change, read without a lock."""
        self._broken: dict[str, str] = {}  # collection -> why its snapshot cannot be served
        self._errors: dict[str, str] = {}  # collection -> the last load error logged
        self._pointer_keys: dict[str, tuple[int, int, int]] = {}
        self._open = False
        self._lock = threading.RLock()  # installs and refreshes
        self._watcher: threading.Thread | None = None
        self._stop = threading.Event()

    # -- watching for published snapshots ---------------------------------------------------

    def watch(self, interval_s: float) -> None:
        """Poll every ``interval_s`` seconds, in a daemon thread, for snapshots published by
        other processes (``refresh``); ``close()`` stops it."""
        if interval_s <= 0 or self._watcher is not None:
            return
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(interval_s):
                try:
                    self.refresh()
                except Exception:  # a bad snapshot must not stop the watcher
                    log.exception("refreshing the snapshots under %s failed", self.root)

        self._watcher = threading.Thread(target=loop, name="snapshot-watch", daemon=True)
        self._watcher.start()

    def stop_watching(self) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
        self._watcher = None

    def _require_open(self) -> None:
        if not self._open:
            raise RetrievalError(f"document store at {self.root} is not open")

    # -- picking up published snapshots ------------------------------------------------------

    def refresh(self) -> list[str]:
        """Load every collection whose ``CURRENT`` changed since this object last looked (one
        ``stat`` per collection when nothing did), and drop those that are gone. Returns the
        names that changed. A snapshot that cannot be read keeps the one served before it."""
        self._require_open()
        folder = self.root / "collections"
        names = sorted(p.name for p in folder.iterdir() if (p / POINTER).is_file())
        changed: list[str] = []
        with self._lock:
            for name in names:
                if self._refresh_one(name):
                    changed.append(name)
            for name in set(self._snapshots) | set(self._broken):
                if name not in names:
                    self._uninstall(name)
                    changed.append(name)
        return changed

    def _refresh_one(self, name: str) -> bool:
        path = collection_dir(self.root, name)
        try:
            st = (path / POINTER).stat()
        except FileNotFoundError:
            return False
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        if self._pointer_keys.get(name) == key:
            return False
        self._pointer_keys[name] = key
        try:
            version = read_pointer(path)
        except RetrievalError as exc:
            self._mark_broken(name, str(exc))
            return False
        current = self._snapshots.get(name)
        if version is None or (current is not None and current.version == version):
            return False
        try:
            snapshot = Snapshot.load(
                snapshots_dir(path) / version, use_gpu=self.index_settings.use_gpu
            )
        except RetrievalError as exc:
            self._mark_broken(name, str(exc))
            return False
        self._install(name, snapshot)
        self._errors.pop(name, None)
        log.info("collection %r now served from snapshot %s", name, version)
        return True

    def _remember_pointer(self, name: str) -> None:
        """Note ``CURRENT`` as it is now, so that ``refresh`` does not load it again."""
        st = (collection_dir(self.root, name) / POINTER).stat()
        self._pointer_keys[name] = (st.st_mtime_ns, st.st_size, st.st_ino)

    def _mark_broken(self, name: str, reason: str) -> None:
        """Record that ``name``'s published snapshot cannot be loaded; the next ``refresh``
        tries again (it may have been pruned while this process was slow to look). Logged once
        per reason."""
        self._pointer_keys.pop(name, None)
        first = self._errors.get(name) != reason
        self._errors[name] = reason
        if name in self._snapshots:
            if first:
                log.error("%s; still serving %r from its previous snapshot", reason, name)
            return
        if first:
            log.error("%s: re-ingest it", reason)
        self._broken = self._broken | {name: reason}

    def _install(self, name: str, snapshot: Snapshot) -> None:
        """Serve ``snapshot`` for ``name`` (none when it holds no chunks). The old one is only
        dropped from the map: searches that hold it finish on it."""
        others = {n: s for n, s in self._snapshots.items() if n != name}
        self._snapshots = others | ({name: snapshot} if snapshot.count else {})
        self._broken = {n: r for n, r in self._broken.items() if n != name}

    def _uninstall(self, name: str) -> None:
        self._snapshots = {n: s for n, s in self._snapshots.items() if n != name}
        self._broken = {n: r for n, r in self._broken.items() if n != name}
        self._pointer_keys.pop(name, None)

    # -- what is served --------------------------------------------------------------------

    def collections(self) -> dict[str, int]:
        """Each collection's name and number of chunks (as last loaded; no lock, no I/O)."""
        self._require_open()
        counts = {name: s.count for name, s in self._snapshots.items()}
        counts |= {name: 0 for name in self._broken if name not in counts}
        return dict(sorted(counts.items()))

    def has_collection(self, name: str) -> bool:
        """Whether ``name`` holds chunks (or has a snapshot that failed to load); no I/O."""
        self._require_open()
        return name in self._snapshots or name in self._broken

    def load_keyword_indexes(self) -> list[str]:
        """Load the BM25 index each served snapshot keeps (bm25s and scipy imported with the
        first), so that no request pays for it; a snapshot that keeps none builds it at its
        first keyword search instead, not here. The collections loaded; one whose index cannot
        be read is left to fail its own searches."""
        loaded = []
        for name, snapshot in sorted(self._snapshots.items()):
            if snapshot.keyword_source == "stored":
                try:
                    snapshot.keyword_index()
                except BrokenIndex as exc:
                    log.warning("collection %r: %s", name, exc)
                    continue
                loaded.append(name)
        return loaded

    def snapshot(self, name: str) -> Snapshot | None:
        """The snapshot ``name`` is served from now (None when it has none)."""
        return self._snapshots.get(name)

    def problems(self) -> dict[str, str]:
        """Collections whose snapshot could not be loaded, with the reason (some may still
        serve their previous snapshot)."""
        return dict(self._broken)

    def check(self) -> dict[str, str]:
        """Collections that cannot be served at all (no snapshot loaded), with the reason:
        what ``/readyz`` reports. No I/O."""
        self._require_open()
        broken = dict(self._broken)
        return {name: broken[name] for name in sorted(broken) if name not in self._snapshots}

    def _serving(self, collection: str) -> Snapshot:
        self._require_open()
        snapshot = self._snapshots.get(collection)
        if snapshot is None:
            if collection in self._broken:
                raise BrokenIndex(
                    f"collection {collection!r} cannot be searched: its index could not be "
                    "loaded; re-ingest it"
                )
            raise UnknownCollection.named(collection, self._snapshots)
        return snapshot
